package train

import (
	"bytes"
	"compress/gzip"
	"slices"
	"strings"
	"testing"
)

func loadDigits(t testing.TB) *Dataset {
	t.Helper()
	d, err := LoadDigits("")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestLoadDigitsEmbedded(t *testing.T) {
	d := loadDigits(t)
	if d.Len() != 1797 || d.Features != DigitsFeatures || d.Classes != DigitsClasses {
		t.Fatalf("got %d rows × %d features, %d classes", d.Len(), d.Features, d.Classes)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	var counts [DigitsClasses]int
	for _, y := range d.Y {
		counts[y]++
	}
	for c, n := range counts {
		if n < 150 {
			t.Errorf("class %d has only %d rows", c, n)
		}
	}
	lo, hi := d.X[0], d.X[0]
	for _, v := range d.X {
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo != 0 || hi != 1 {
		t.Fatalf("features span [%v, %v], want [0, 1] after scaling by 1/16", lo, hi)
	}
}

func TestReadDigitsPlainAndGzipAgree(t *testing.T) {
	row := func(label int, px int) string {
		f := make([]string, 65)
		for i := range 64 {
			f[i] = "0"
		}
		f[3] = string(rune('0' + px%10))
		f[64] = string(rune('0' + label))
		return strings.Join(f, ",")
	}
	csv := row(3, 8) + "\n" + row(7, 4) + "\n\n"
	plain, err := ReadDigits(strings.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write([]byte(csv))
	zw.Close()
	zipped, err := ReadDigits(&zb)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plain.X, zipped.X) || !slices.Equal(plain.Y, zipped.Y) {
		t.Fatal("gzip and plain CSV parse differently")
	}
	if plain.Len() != 2 || plain.Y[0] != 3 || plain.Y[1] != 7 || plain.Row(0)[3] != 0.5 || plain.Row(1)[3] != 0.25 {
		t.Fatalf("parsed %v %v", plain.Y, plain.X[:8])
	}
}

func TestReadDigitsRejectsMalformedRows(t *testing.T) {
	good := strings.Repeat("0,", 64) + "5"
	for name, in := range map[string]string{
		"short row":   strings.Repeat("0,", 63) + "5",
		"pixel 17":    "17," + strings.Repeat("0,", 63) + "5",
		"label 10":    strings.Repeat("0,", 64) + "10",
		"label 2.5":   strings.Repeat("0,", 64) + "2.5",
		"not numeric": "x," + strings.Repeat("0,", 63) + "5",
		"empty":       "\n",
	} {
		if _, err := ReadDigits(strings.NewReader(good + "\n" + in)); name != "empty" && err == nil {
			t.Errorf("%s: no error", name)
		}
		if name == "empty" {
			if _, err := ReadDigits(strings.NewReader(in)); err == nil {
				t.Errorf("%s: no error", name)
			}
		}
	}
}

func TestSplitIsSeededDisjointAndCovering(t *testing.T) {
	d := loadDigits(t)
	// Tag each row with its index so that the split can be traced back.
	tagged := &Dataset{Features: 1, Classes: 256, X: make([]float32, d.Len()), Y: make([]uint8, d.Len())}
	for i := range tagged.X {
		tagged.X[i] = float32(i)
	}
	a1, b1, err := tagged.Split(0.2, 7)
	if err != nil {
		t.Fatal(err)
	}
	a2, b2, _ := tagged.Split(0.2, 7)
	a3, _, _ := tagged.Split(0.2, 8)
	if !slices.Equal(a1.X, a2.X) || !slices.Equal(b1.X, b2.X) {
		t.Fatal("same seed, different split")
	}
	if slices.Equal(a1.X, a3.X) {
		t.Fatal("different seeds, same split")
	}
	if want := d.Len() - int(float64(d.Len())*0.2+0.5); a1.Len() != want {
		t.Fatalf("train has %d rows, want %d", a1.Len(), want)
	}
	seen := make([]bool, d.Len())
	for _, v := range append(slices.Clone(a1.X), b1.X...) {
		if seen[int(v)] {
			t.Fatalf("row %v appears twice", v)
		}
		seen[int(v)] = true
	}
	if slices.Contains(seen, false) {
		t.Fatal("a row is in neither set")
	}
	if _, _, err := tagged.Split(1, 1); err == nil {
		t.Fatal("fraction 1 accepted")
	}
}

package train

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/ringtail-ml/ringtail/data"
)

// Digits data set shape: 8×8 pixels in 0..16, ten classes.
const (
	DigitsFeatures = 64
	DigitsClasses  = 10
	digitsMaxPixel = 16
)

// Dataset is a dense classification data set: row i has the features
// X[i*Features:(i+1)*Features] and the label Y[i] in 0..Classes-1.
type Dataset struct {
	Features int
	Classes  int
	X        []float32
	Y        []uint8
}

// Len returns the number of rows.
func (d *Dataset) Len() int { return len(d.Y) }

// Row returns the features of row i (a view, not a copy).
func (d *Dataset) Row(i int) []float32 { return d.X[i*d.Features : (i+1)*d.Features] }

// Validate checks that the shape is consistent and every label in range.
func (d *Dataset) Validate() error {
	if d.Features < 1 || d.Classes < 2 {
		return fmt.Errorf("train: data set with %d features and %d classes", d.Features, d.Classes)
	}
	if len(d.X) != len(d.Y)*d.Features {
		return fmt.Errorf("train: data set has %d feature values for %d rows of %d", len(d.X), len(d.Y), d.Features)
	}
	for i, y := range d.Y {
		if int(y) >= d.Classes {
			return fmt.Errorf("train: row %d: label %d not in 0..%d", i, y, d.Classes-1)
		}
	}
	return nil
}

// Subset returns the rows idx of d, in that order, as a new Dataset.
func (d *Dataset) Subset(idx []int) *Dataset {
	s := &Dataset{Features: d.Features, Classes: d.Classes,
		X: make([]float32, 0, len(idx)*d.Features), Y: make([]uint8, 0, len(idx))}
	for _, i := range idx {
		s.X = append(s.X, d.Row(i)...)
		s.Y = append(s.Y, d.Y[i])
	}
	return s
}

// Split shuffles the row indices with a PCG stream seeded by seed and
// returns the first round((1-testFrac)·n) rows as the training set and the
// rest as the held-out set. The same seed gives the same split on every
// machine and every rank.
func (d *Dataset) Split(testFrac float64, seed uint64) (trainSet, testSet *Dataset, err error) {
	if !(testFrac > 0 && testFrac < 1) {
		return nil, nil, fmt.Errorf("train: held-out fraction %v must be in (0, 1)", testFrac)
	}
	n := d.Len()
	nTest := int(float64(n)*testFrac + 0.5)
	if nTest < 1 || nTest >= n {
		return nil, nil, fmt.Errorf("train: %d rows cannot be split with a held-out fraction of %v", n, testFrac)
	}
	perm := permutation(n, seed, streamSplit)
	return d.Subset(perm[:n-nTest]), d.Subset(perm[n-nTest:]), nil
}

// PCG stream identifiers, so that the split, the initial weights and each
// epoch's shuffle draw from independent streams of one seed.
const (
	streamSplit uint64 = 0x5b1170000 + iota
	streamInit
	streamEpoch
	streamPartition
)

// permutation returns a seeded Fisher–Yates permutation of 0..n-1.
func permutation(n int, seed, stream uint64) []int {
	rng := rand.New(rand.NewPCG(seed, stream))
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	rng.Shuffle(n, func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p
}

// ReadDigits parses the digits CSV — 64 pixel values in 0..16 then the
// label 0..9 per line, no header — gzip-compressed or not (detected from
// the first bytes). Pixels are scaled to [0, 1] by dividing by 16.
func ReadDigits(r io.Reader) (*Dataset, error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("train: digits: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	d := &Dataset{Features: DigitsFeatures, Classes: DigitsClasses}
	sc := bufio.NewScanner(br)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		fields := strings.Split(text, ",")
		if len(fields) != DigitsFeatures+1 {
			return nil, fmt.Errorf("train: digits line %d: %d columns, want %d", line, len(fields), DigitsFeatures+1)
		}
		for j, f := range fields {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return nil, fmt.Errorf("train: digits line %d column %d: %w", line, j+1, err)
			}
			if j == DigitsFeatures {
				if v != float64(int(v)) || v < 0 || v >= DigitsClasses {
					return nil, fmt.Errorf("train: digits line %d: label %v is not a digit 0..9", line, f)
				}
				d.Y = append(d.Y, uint8(v))
				continue
			}
			if v < 0 || v > digitsMaxPixel {
				return nil, fmt.Errorf("train: digits line %d column %d: pixel %v not in 0..%d", line, j+1, f, digitsMaxPixel)
			}
			d.X = append(d.X, float32(v/digitsMaxPixel))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("train: digits: %w", err)
	}
	if d.Len() == 0 {
		return nil, errors.New("train: digits: no rows")
	}
	return d, nil
}

// LoadDigits reads the digits data set from path, or the copy embedded in
// the module's data package when path is empty.
func LoadDigits(path string) (*Dataset, error) {
	var (
		r   io.ReadCloser
		err error
	)
	if path == "" {
		r, err = data.OpenDigits()
	} else {
		r, err = os.Open(path)
	}
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	defer r.Close()
	d, err := ReadDigits(r)
	if err != nil && path != "" {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, err
}

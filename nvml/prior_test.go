package nvml

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestNormalizeModel_RealNVMLNames(t *testing.T) {
	cases := map[string]string{
		"Tesla V100-SXM2-16GB":     "V100",
		"Tesla V100-PCIE-32GB":     "V100",
		"Tesla P100-PCIE-16GB":     "P100",
		"Tesla K80":                "K80",
		"Tesla M60":                "M60",
		"Tesla T4":                 "T4",
		"Tesla P4":                 "P4",
		"NVIDIA A100-SXM4-40GB":    "A100",
		"NVIDIA A100 80GB PCIe":    "A100",
		"NVIDIA A10G":              "A10G",
		"NVIDIA A10":               "A10",
		"NVIDIA H100 80GB HBM3":    "H100",
		"NVIDIA H100 PCIe":         "H100",
		"NVIDIA H100 NVL":          "H100",
		"NVIDIA H200":              "H200",
		"NVIDIA GH200 480GB":       "GH200",
		"NVIDIA L40S":              "L40S",
		"NVIDIA L4":                "L4",
		"v100":                     "V100",
		"H100":                     "H100",
		"NVIDIA GeForce RTX 4090":  "",
		"":                         "",
		"Tesla V1000 (not a card)": "",
	}
	for name, want := range cases {
		if got := NormalizeModel(name); got != want {
			t.Errorf("NormalizeModel(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestPriorThroughput_V100IsThreeTimesP100(t *testing.T) {
	v, ok1 := PriorThroughput("Tesla V100-SXM2-16GB")
	p, ok2 := PriorThroughput("Tesla P100-PCIE-16GB")
	if !ok1 || !ok2 {
		t.Fatal("V100 or P100 missing from the prior table")
	}
	if r := v / p; math.Abs(r-3) > 0.05 {
		t.Fatalf("V100/P100 = %v, want ≈3 (AntDT §I)", r)
	}
}

func TestPriorThroughput_GenerationsAreOrdered(t *testing.T) {
	order := []string{"K80", "P100", "V100", "A100", "H100", "H200"}
	prev := 0.0
	for _, m := range order {
		x, ok := PriorThroughput(m)
		if !ok {
			t.Fatalf("%s missing", m)
		}
		if x <= prev {
			t.Fatalf("%s = %v, not above its predecessor %v", m, x, prev)
		}
		prev = x
	}
	if _, ok := PriorThroughput("NVIDIA GeForce RTX 4090"); ok {
		t.Fatal("unknown model must report ok=false")
	}
}

func TestPriors_TableIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Priors() {
		if seen[p.Model] {
			t.Errorf("duplicate model %s", p.Model)
		}
		seen[p.Model] = true
		if p.Throughput <= 0 || p.Basis == "" {
			t.Errorf("%s: throughput %v basis %q", p.Model, p.Throughput, p.Basis)
		}
		if NormalizeModel(p.Model) != p.Model {
			t.Errorf("model key %s does not normalise to itself", p.Model)
		}
		if strings.ToUpper(p.Model) != p.Model {
			t.Errorf("model key %s is not upper case", p.Model)
		}
	}
}

func TestPriorWeights_V100BesideP100(t *testing.T) {
	w, err := PriorWeights([]string{"Tesla V100-SXM2-16GB", "Tesla P100-PCIE-16GB", "V100", "P100"})
	if err != nil {
		t.Fatal(err)
	}
	v, p := 1.0, 0.33
	want := []float64{v / (2*v + 2*p), p / (2*v + 2*p), v / (2*v + 2*p), p / (2*v + 2*p)}
	for i := range want {
		if math.Abs(w.Share[i]-want[i]) > 1e-12 || !w.Known[i] {
			t.Fatalf("rank %d: share %v known %v, want %v", i, w.Share[i], w.Known[i], want[i])
		}
	}
	if math.Abs(w.Share[0]/w.Share[1]-3) > 0.05 {
		t.Fatalf("V100:P100 share ratio %v, want ≈3", w.Share[0]/w.Share[1])
	}
	if w.Slowdown[0] != 1 || math.Abs(w.Slowdown[1]-1/0.33) > 1e-12 {
		t.Fatalf("slowdowns %v", w.Slowdown)
	}
}

func TestPriorWeights_UnknownModelsGetTheMedianOfTheKnown(t *testing.T) {
	w, err := PriorWeights([]string{"NVIDIA GeForce RTX 4090", "V100", "P100", "A100", ""})
	if err != nil {
		t.Fatal(err)
	}
	// Known: 0.33, 1.0, 2.2 → median 1.0.
	if w.Known[0] || w.Known[4] || w.Speed[0] != 1.0 || w.Speed[4] != 1.0 {
		t.Fatalf("unknown ranks: %+v", w)
	}
	sum := 0.0
	for _, s := range w.Share {
		sum += s
	}
	if math.Abs(sum-1) > 1e-12 {
		t.Fatalf("shares sum to %v", sum)
	}
	if w.Slowdown[3] != 1 || math.Abs(w.Slowdown[0]-2.2) > 1e-12 {
		t.Fatalf("slowdowns %v", w.Slowdown)
	}

	w, err = PriorWeights([]string{"V100", "P100"})
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := PriorWeights([]string{"V100", "P100", "mystery"}) // median of two known: their mean
	if math.Abs(w2.Speed[2]-(1.0+0.33)/2) > 1e-12 || w.Speed[0] != 1 {
		t.Fatalf("median of two: %v", w2.Speed)
	}
}

func TestPriorWeights_NothingKnownIsEqualShares(t *testing.T) {
	w, err := PriorWeights([]string{"", "mystery", "RTX 4090"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range w.Share {
		if math.Abs(w.Share[i]-1.0/3) > 1e-12 || w.Slowdown[i] != 1 || w.Known[i] {
			t.Fatalf("rank %d: %+v", i, w)
		}
	}
	if _, err := PriorWeights(nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("no ranks: err = %v", err)
	}
}

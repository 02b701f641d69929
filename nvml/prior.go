package nvml

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Prior is one row of the device throughput prior table.
type Prior struct {
	// Model is the normalised model name, e.g. "V100".
	Model string
	// Throughput is expected data-parallel training throughput relative
	// to a V100 (V100 = 1.0), for mixed-precision training where the
	// device supports it.
	Throughput float64
	// Basis says where the number comes from.
	Basis string
}

// Priors returns the prior table, sorted by Throughput and then Model. The
// numbers are coarse (expect ±30%): they only order devices and seed
// throughput-proportional allocations until ringtail has measured step
// times, which always replace them. See docs/nvml.md for the method.
func Priors() []Prior {
	const (
		antdt  = "AntDT (papers/000) §I: V100 consistently ~3x P100"
		perDie = "per GPU die as NVML lists it; "
		peak   = "assumption: vendor peak FP16/BF16 dense tensor rate and memory bandwidth relative to V100 (125 TFLOPS, 900 GB/s), derated toward the memory-bound ratio"
	)
	return []Prior{
		{"K80", 0.12, perDie + "assumption: ~1/3 of a P100 (4.4 vs 10.6 FP32 TFLOPS per die, no fast FP16)"},
		{"M60", 0.13, perDie + "assumption: ~0.4x P100 (4.8 vs 10.6 FP32 TFLOPS per die, no fast FP16)"},
		{"P4", 0.15, "assumption: 5.5 FP32 TFLOPS, 75 W, no fast FP16; ~0.45x P100"},
		{"P40", 0.30, "assumption: 12 FP32 TFLOPS, no fast FP16; ~0.9x P100"},
		{"P100", 0.33, antdt},
		{"T4", 0.28, "assumption: 65 FP16 tensor TFLOPS but 70 W and 320 GB/s; ~1/4-1/3 of a V100 in training"},
		{"L4", 0.60, peak + " (121 TFLOPS, 300 GB/s)"},
		{"A10G", 0.75, peak + " (A10 at lower clocks, 600 GB/s)"},
		{"A10", 0.80, peak + " (125 TFLOPS, 600 GB/s)"},
		{"V100", 1.00, "reference device"},
		{"A40", 1.10, peak + " (150 TFLOPS, 696 GB/s)"},
		{"A30", 1.30, peak + " (165 TFLOPS, 933 GB/s)"},
		{"L40", 1.30, peak + " (181 TFLOPS, 864 GB/s)"},
		{"L40S", 1.80, peak + " (362 TFLOPS, 864 GB/s)"},
		{"A100", 2.20, "assumption: vendor-reported 2-2.5x V100 for mixed-precision training of common models"},
		{"H100", 4.40, "assumption: ~2x A100 for BF16 training without FP8 (989 vs 312 dense TFLOPS, 3.35 vs 2.0 TB/s); PCIe and NVL parts are slower and not told apart"},
		{"GH200", 4.60, "assumption: H100 compute with faster HBM3/HBM3e"},
		{"H200", 5.00, "assumption: H100 compute, 4.8 vs 3.35 TB/s HBM3e; ~+15% on memory-bound training"},
	}
}

// PriorThroughput returns the prior relative throughput (V100 = 1.0) of a
// device model. model may be a raw NVML name ("Tesla V100-SXM2-16GB") or a
// normalised one ("V100"). The second result is false for unknown models;
// callers should then wait for measurements rather than guess.
func PriorThroughput(model string) (float64, bool) {
	m := NormalizeModel(model)
	if m == "" {
		return 0, false
	}
	for _, p := range Priors() {
		if p.Model == m {
			return p.Throughput, true
		}
	}
	return 0, false
}

// NormalizeModel maps a device name to the model key of the prior table:
// "Tesla V100-SXM2-16GB" → "V100", "NVIDIA H100 80GB HBM3" → "H100",
// "NVIDIA A10G" → "A10G". The name is upper-cased and split at every
// character that is not a letter or digit; the first piece that is exactly
// a known model wins, so "A100" never matches "A10". Form factor (SXM,
// PCIe, NVL) and memory size are ignored. It returns "" if no piece is a
// known model.
func NormalizeModel(name string) string {
	tokens := strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	priors := Priors()
	for _, tok := range tokens {
		for _, p := range priors {
			if p.Model == tok {
				return p.Model
			}
		}
	}
	return ""
}

// SeedWeights are step-0 speed weights for a job's ranks, from the prior
// table alone (see PriorWeights).
type SeedWeights struct {
	// Speed is each rank's prior throughput relative to a V100. A rank
	// whose model is unknown gets the median of the known ranks' priors,
	// or 1 when no rank's model is known.
	Speed []float64
	// Share is Speed normalised to sum to 1: the fraction of the global
	// batch each rank gets before any step time has been measured
	// (throughput-proportional, as AntDT-DD starts).
	Share []float64
	// Slowdown is the fastest rank's Speed divided by each rank's (1 for
	// the fastest, 3 for a P100 beside a V100): the form of
	// straggler.MonitorConfig.Prior, where > 1 marks a deterministic
	// straggler.
	Slowdown []float64
	// Known says which ranks' models are in the prior table.
	Known []bool
}

// PriorWeights turns the device of every rank (a raw NVML name such as
// "Tesla V100-SXM2-16GB", a model key such as "P100", or "" for none) into
// step-0 speed weights. It is pure; measured step times replace the
// weights as soon as there are any. V100 beside P100 gives shares 0.75 and
// 0.25 (AntDT §I: a V100 is ~3× a P100).
func PriorWeights(devices []string) (SeedWeights, error) {
	if len(devices) == 0 {
		return SeedWeights{}, fmt.Errorf("%w: no ranks to weigh", ErrInvalidConfig)
	}
	w := SeedWeights{
		Speed:    make([]float64, len(devices)),
		Share:    make([]float64, len(devices)),
		Slowdown: make([]float64, len(devices)),
		Known:    make([]bool, len(devices)),
	}
	var known []float64
	for i, d := range devices {
		if p, ok := PriorThroughput(d); ok {
			w.Speed[i], w.Known[i] = p, true
			known = append(known, p)
		}
	}
	fill := 1.0
	if n := len(known); n > 0 {
		slices.Sort(known)
		fill = (known[(n-1)/2] + known[n/2]) / 2
	}
	total, fastest := 0.0, 0.0
	for i := range w.Speed {
		if !w.Known[i] {
			w.Speed[i] = fill
		}
		total += w.Speed[i]
		fastest = max(fastest, w.Speed[i])
	}
	for i, v := range w.Speed {
		w.Share[i] = v / total
		w.Slowdown[i] = fastest / v
	}
	return w, nil
}

package settings

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseBytes parses a size: an integer number of bytes, or one with a
// binary (KiB, MiB, GiB, TiB) or decimal (KB, MB, GB, TB) suffix. Every
// reader of a size setting (RINGTAIL_MEM_CAP, RINGTAIL_SAMPLE_BYTES:
// ringtail-train and, through the C ABI, the PyTorch hook) parses it so.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= 0) || v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q: want bytes, e.g. 16GiB, 512MiB or 1073741824", s)
	}
	return int64(math.Round(v * mult)), nil
}

// RankBytes returns rank's size from spec: one size (ParseBytes) for
// every rank, or one per rank comma-separated; 0 when spec is empty.
func RankBytes(spec string, rank, world int) (int64, error) {
	if strings.TrimSpace(spec) == "" {
		return 0, nil
	}
	parts := strings.Split(spec, ",")
	switch {
	case len(parts) == 1:
	case len(parts) == world && rank >= 0 && rank < world:
		parts = parts[rank:]
	default:
		return 0, fmt.Errorf("%q: %d sizes for rank %d of %d (give one, or one per rank)", spec, len(parts), rank, world)
	}
	return ParseBytes(parts[0])
}

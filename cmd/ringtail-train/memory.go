package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/balance"
	"github.com/ringtail-ml/ringtail/examples/train"
	"github.com/ringtail-ml/ringtail/internal/settings"
	"github.com/ringtail-ml/ringtail/nvml"
)

// Environment defaults of the memory flags (internal/settings' table).
const (
	envMemCap      = "RINGTAIL_MEM_CAP"
	envSampleBytes = "RINGTAIL_SAMPLE_BYTES"
	envFakeGPU     = "RINGTAIL_FAKE_GPU"
)

// fakeMemory is the frame-buffer memory of the models --fake-gpu
// emulates: the AntDT mix's V100 (32 GB) and P100 (16 GB), and a few
// others.
func fakeMemory(model string) (uint64, bool) {
	switch model {
	case "V100":
		return 32 << 30, true
	case "P100":
		return 16 << 30, true
	case "T4":
		return 16 << 30, true
	case "A100":
		return 80 << 30, true
	case "H100":
		return 80 << 30, true
	}
	return 0, false
}

// fakeGPUs parses --fake-gpu: one model per rank, comma-separated, or
// one for every rank ("" for none). Each model must be in the prior table
// (its speed) and fakeMemory (its memory).
func fakeGPUs(spec string, world int) ([]string, error) {
	if spec == "" {
		return nil, nil
	}
	models := strings.Split(spec, ",")
	if len(models) == 1 {
		models = slicesRepeat(models[0], world)
	}
	if len(models) != world {
		return nil, fmt.Errorf("--fake-gpu %q: %d models for %d ranks (give one, or one per rank)", spec, len(models), world)
	}
	for i, m := range models {
		models[i] = nvml.NormalizeModel(strings.TrimSpace(m))
		if _, ok := fakeMemory(models[i]); !ok {
			return nil, fmt.Errorf("--fake-gpu %q: model %q of rank %d is not one the mock emulates (V100, P100, T4, A100, H100)", spec, m, i)
		}
		if _, ok := nvml.PriorThroughput(models[i]); !ok {
			return nil, fmt.Errorf("--fake-gpu %q: no prior speed for %q", spec, m)
		}
	}
	return models, nil
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// fakeDevice is the NVML mock of one rank: a single device of the model,
// its memory all free.
func fakeDevice(model string) *nvml.Fake {
	mem, _ := fakeMemory(model)
	return nvml.NewFake(nvml.Sample{Name: "Tesla " + model + " (ringtail mock)", Model: model,
		MemoryTotalBytes: mem, MemoryFreeBytes: mem})
}

// fakeSlowdown is the inject clause that slows the mock's slower devices
// by their prior speed against the fastest (a P100 beside a V100: 3.03×),
// or "" when every rank is as fast.
func fakeSlowdown(models []string) (string, error) {
	w, err := nvml.PriorWeights(models)
	if err != nil {
		return "", err
	}
	var clauses []string
	for r, s := range w.Slowdown {
		if s > 1+1e-9 {
			clauses = append(clauses, fmt.Sprintf("slow=%d:%sx", r, strconv.FormatFloat(s, 'f', 3, 64)))
		}
	}
	return strings.Join(clauses, ";"), nil
}

// memCapOf returns this rank's memory for activations from --mem-cap (one
// size, or one per rank comma-separated), or 0 when it is empty.
func memCapOf(spec string, rank, world int) (int64, error) {
	b, err := settings.RankBytes(spec, rank, world)
	if err != nil {
		return 0, fmt.Errorf("--mem-cap %w", err)
	}
	return b, nil
}

// deviceFree returns the free memory of GPU index of t (0 and the reason
// without one).
func deviceFree(t nvml.Telemetry, index int) (int64, error) {
	if t == nil {
		return 0, errors.New("no NVML")
	}
	n, err := t.DeviceCount()
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, errors.New("no GPU")
	}
	d, err := t.Device(index % n)
	if err != nil {
		return 0, err
	}
	s, err := d.Sample()
	if err != nil {
		return 0, err
	}
	free := s.MemoryFreeBytes
	if free == 0 {
		free = s.MemoryTotalBytes
	}
	return int64(min(free, math.MaxInt64/2)), nil
}

// microCap is this rank's largest micro-batch: balance.MaxBatchFromMemory
// of its memory (capBytes from --mem-cap, else the device's free memory,
// read through dev) at sampleBytes per sample; 0 (unbounded) when
// sampleBytes is 0. It says where the memory came from.
func microCap(capBytes, sampleBytes int64, dev func() (int64, error)) (int, string, error) {
	if sampleBytes == 0 {
		return 0, "", nil
	}
	source := "--mem-cap"
	if capBytes == 0 {
		free, err := dev()
		if err != nil {
			return 0, "", fmt.Errorf("--sample-bytes needs the device's memory: give --mem-cap (or $%s) where NVML has none (%w)", envMemCap, err)
		}
		capBytes, source = free, "nvml free memory"
	}
	b, err := balance.MaxBatchFromMemory(capBytes, sampleBytes)
	if err != nil {
		return 0, "", fmt.Errorf("memory cap of %d bytes (%s) at %d bytes per sample: %w", capBytes, source, sampleBytes, err)
	}
	return b, source, nil
}

// gatherCaps gathers every rank's micro-batch cap (a collective), so
// every rank's policy plans with the same caps.
func gatherCaps(ctx context.Context, comm *ringtail.Comm, mine int) ([]int, error) {
	all := make([]int64, comm.Size())
	if err := comm.AllGather(ctx, ringtail.Int64s([]int64{int64(mine)}), ringtail.Int64s(all)); err != nil {
		return nil, fmt.Errorf("gathering micro-batch caps: %w", err)
	}
	out := make([]int, len(all))
	for r, c := range all {
		out[r] = int(c)
	}
	return out, nil
}

// rankLine formats every rank's time to the reduction and micro-batches
// for the text summary.
func rankLine(ranks []train.RankStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "per rank (busy spread %.1f%%):", 100*train.BusySpread(ranks))
	for _, r := range ranks {
		fmt.Fprintf(&b, "  r%d busy %.1fms micro ≤%d (cap %d) accum ≤%d", r.Rank, float64(r.BusyMean.Microseconds())/1000, r.MaxMicro, r.MicroCap, r.MaxAccum)
	}
	return b.String()
}

package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/ringtail-ml/ringtail/balance"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

func TestMemCapIsOneForAllOrOnePerRank(t *testing.T) {
	if b, err := memCapOf("16GiB", 3, 4); err != nil || b != 16<<30 {
		t.Fatalf("one for all: %d, %v", b, err)
	}
	if b, err := memCapOf("16GiB,16GiB,32GiB,32GiB", 2, 4); err != nil || b != 32<<30 {
		t.Fatalf("rank 2 of a list: %d, %v", b, err)
	}
	if b, err := memCapOf("", 0, 4); err != nil || b != 0 {
		t.Fatalf("none: %d, %v", b, err)
	}
	if _, err := memCapOf("1GiB,2GiB", 0, 4); err == nil {
		t.Fatal("two sizes for four ranks accepted")
	}
}

// The NVML mock as the AntDT mix: P100s (16 GB) and V100s (32 GB), the
// P100s slowed to their prior speed, caps from the mock's free memory.
func TestFakeGPUsAreTheV100P100Mix(t *testing.T) {
	models, err := fakeGPUs("P100,p100,Tesla V100-SXM2-32GB,V100", 4)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(models, ",") != "P100,P100,V100,V100" {
		t.Fatalf("models %v", models)
	}
	clause, err := fakeSlowdown(models)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := inject.Parse(clause)
	if err != nil {
		t.Fatalf("clause %q: %v", clause, err)
	}
	in, err := inject.New(spec, 4)
	if err != nil {
		t.Fatal(err)
	}
	for r, want := range []float64{3.03, 3.03, 1, 1} {
		got := float64(in.At(r, 5, 1000).Compute) / 1000
		if got < want-0.01 || got > want+0.01 {
			t.Errorf("rank %d computes ×%.3f, want ×%.2f (clause %q)", r, got, want, clause)
		}
	}
	caps := make([]int, 4)
	for r, m := range models {
		dev := fakeDevice(m)
		caps[r], _, err = microCap(0, 2<<30, func() (int64, error) { return deviceFree(dev, 0) })
		if err != nil {
			t.Fatal(err)
		}
	}
	if caps[0] != 7 || caps[2] != 15 {
		t.Fatalf("caps %v, want P100 ⌊0.95·16/2⌋ = 7 and V100 15", caps)
	}
	if _, err := fakeGPUs("P100,K80", 2); err == nil {
		t.Fatal("a model the mock has no memory for accepted")
	}
	if _, err := fakeGPUs("P100,V100", 4); err == nil {
		t.Fatal("two models for four ranks accepted")
	}
}

func TestMicroCapNeedsMemoryOnlyWithSampleBytes(t *testing.T) {
	noGPU := func() (int64, error) { return 0, errors.New("no GPU") }
	if c, _, err := microCap(0, 0, noGPU); err != nil || c != 0 {
		t.Fatalf("no --sample-bytes: %d, %v; want unbounded", c, err)
	}
	if _, _, err := microCap(0, 1<<20, noGPU); err == nil {
		t.Fatal("--sample-bytes without a GPU or --mem-cap accepted")
	}
	if c, src, err := microCap(10<<20, 1<<20, noGPU); err != nil || c != 9 || src != "--mem-cap" {
		t.Fatalf("--mem-cap 10MiB at 1MiB per sample: %d from %q, %v; want 9", c, src, err)
	}
	if _, _, err := microCap(1<<20, 2<<20, noGPU); !errors.Is(err, balance.ErrInfeasible) {
		t.Fatalf("no sample fits: %v", err)
	}
}

package main

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

// gradcodeCLI runs 'ringtail gradcode ARGS...'.
func gradcodeCLI(args ...string) (code int, stdout, stderr string) {
	return ringtailCLI(append([]string{"gradcode"}, args...)...)
}

// The JSON plan carries the fields the spec names, and its decode vector
// really decodes: Σ a_i·B[i] = 1ᵀ with zeros on the stragglers.
func TestGradcodePlanJSON(t *testing.T) {
	code, out, errs := gradcodeCLI("plan", "--n", "6", "--s", "2", "--throughput", "1,1,2,2,4,4", "--stragglers", "1,4", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var p struct {
		Scheme       string `json:"scheme"`
		N, S, K      int
		Assignment   [][]int     `json:"assignment"`
		B            [][]float64 `json:"B"`
		Decode       []float64   `json:"decode"`
		PayloadDType string      `json:"payload_dtype"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("bad JSON %q: %v", out, err)
	}
	if p.Scheme != "hetero" || p.N != 6 || p.S != 2 || p.PayloadDType != "float32" {
		t.Fatalf("header %+v", p)
	}
	var loads []int
	for _, a := range p.Assignment {
		loads = append(loads, len(a))
	}
	if want := []int{3, 3, 6, 6, 12, 12}; !reflect.DeepEqual(loads, want) {
		t.Fatalf("loads %v, want %v", loads, want)
	}
	if len(p.Decode) != 6 || p.Decode[1] != 0 || p.Decode[4] != 0 {
		t.Fatalf("decode %v: want 6 entries, 0 at stragglers 1 and 4", p.Decode)
	}
	for j := 0; j < p.K; j++ {
		sum := 0.0
		for i := range p.B {
			sum += p.Decode[i] * p.B[i][j]
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("partition %d decoded with weight %v", j, sum)
		}
	}
}

// Human output shows the assignment, B and the decoding vector.
func TestGradcodePlanHuman(t *testing.T) {
	code, out, errs := gradcodeCLI("plan", "--n", "5", "--s", "1", "--scheme", "cyclic", "--stragglers", "3")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"scheme cyclic", "n=5 s=1 k=5", "worker  load  partitions", "B (5×5", "decode with stragglers [3]"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

// Bad values are one-line errors with exit status 2; --help works.
func TestGradcodeBadUsageAndHelp(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"plan", "--n", "4", "--s", "4"},
		{"plan", "--n", "4", "--s", "1", "--scheme", "ring"},
		{"plan", "--n", "3", "--s", "1", "--throughput", "1,x,2"},
		{"plan", "--n", "3", "--s", "1", "--stragglers", "7"},
		{"plan", "--n", "3", "--s", "1", "--bogus"},
		{"plan", "--n", "3", "--s", "1", "extra"},
	} {
		code, _, errs := gradcodeCLI(args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if strings.Count(strings.TrimSpace(errs), "\n") != 0 || errs == "" {
			t.Errorf("%v: want a one-line error, got %q", args, errs)
		}
	}
	for _, args := range [][]string{{"--help"}, {"plan", "--help"}} {
		code, out, _ := gradcodeCLI(args...)
		if code != 0 || !strings.Contains(out, "--stragglers") {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
	// More stragglers than the plan tolerates: a runtime failure, exit 1.
	code, _, errs := gradcodeCLI("plan", "--n", "4", "--s", "1", "--scheme", "cyclic", "--construction", "random", "--stragglers", "0,1,2")
	if code != 1 || !strings.Contains(errs, "cannot decode") {
		t.Fatalf("3 stragglers of 4 with s=1: exit %d, stderr %q", code, errs)
	}
}

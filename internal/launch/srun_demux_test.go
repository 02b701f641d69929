package launch

import (
	"strings"
	"testing"
)

// lineRecorder collects the lines written to it.
type lineRecorder struct{ lines []string }

func (r *lineRecorder) Write(p []byte) (int, error) {
	r.lines = append(r.lines, string(p))
	return len(p), nil
}

func TestSrunDemuxRoutesLabelledLines(t *testing.T) {
	var stdout, stderr lineRecorder
	out := newOutput(&stdout, &stderr, true)
	type failure struct {
		rank, status int
		node         string
	}
	var failures []failure
	d := &srunDemux{other: &lineWriter{out: out, dst: out.stderr}, marker: []byte("MARK:j ")}
	d.failed = func(rank, status int, node string) { failures = append(failures, failure{rank, status, node}) }
	for r := range 12 {
		d.ranks = append(d.ranks, out.stream(r, true, nil))
	}
	input := " 0: hello\n11: from eleven\nsrun: error: n1: task 3: Exited with exit code 3\n" +
		"12: out of range\n 3: MARK:j 3 n1\n 4: MARK:j 7\n 5: MARK:j x n1\n 6: MARK:j 1 n1 extra\n" +
		" 7: split" + " across writes\n 8:no space\n 9: " + strings.Repeat("x", maxLine+10) + "\n10: last without newline"
	for len(input) > 0 { // in awkward pieces
		k := min(len(input), 7)
		d.Write([]byte(input[:k]))
		input = input[k:]
	}
	d.Flush()
	want := []string{
		"[0] hello\n", "[11] from eleven\n", "srun: error: n1: task 3: Exited with exit code 3\n", "12: out of range\n",
		"[5] MARK:j x n1\n", "[6] MARK:j 1 n1 extra\n", "[7] split across writes\n", " 8:no space\n",
	}
	got := stderr.lines
	if len(got) != len(want)+3 {
		t.Fatalf("%d lines: %q", len(got), got)
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("line %d = %q, want %q", i, got[i], w)
		}
	}
	// A line longer than maxLine from a rank is cut as the rank's own
	// lines are: in maxLine pieces, every piece the rank's.
	long := got[len(want):]
	if long[0] != "[9] "+strings.Repeat("x", maxLine-4)+"\n" || long[1] != "[9] xxxxxxxxxxxxxx\n" || long[2] != "[10] last without newline\n" {
		t.Errorf("long line pieces %q...", []string{long[0][:12], long[1], long[2]})
	}
	wantFailures := []failure{{3, 3, "n1"}, {4, 7, ""}}
	if len(failures) != len(wantFailures) || failures[0] != wantFailures[0] || failures[1] != wantFailures[1] {
		t.Errorf("failures %v, want %v", failures, wantFailures)
	}
}

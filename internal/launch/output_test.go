package launch

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// writes records every Write call.
type writes struct {
	mu    sync.Mutex
	calls []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, string(p))
	return len(p), nil
}

func TestLineWriterWritesWholePrefixedLines(t *testing.T) {
	var w writes
	o := newOutput(&w, nil, true)
	lw := o.stream(7, false, nil)
	for _, chunk := range []string{"hel", "lo\nwor", "ld\n\nlast"} {
		if n, err := lw.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	lw.Flush()
	want := []string{"[7] hello\n", "[7] world\n", "[7] \n", "[7] last\n"}
	if fmt.Sprint(w.calls) != fmt.Sprint(want) {
		t.Fatalf("writes %q, want %q", w.calls, want)
	}
}

func TestLineWriterSplitsOverlongLines(t *testing.T) {
	var w writes
	lw := newOutput(&w, nil, false).stream(0, false, nil)
	long := strings.Repeat("x", 2*maxLine+10)
	lw.Write([]byte(long[:100]))
	lw.Write([]byte(long[100:] + "\n"))
	lw.Flush()
	if len(w.calls) != 3 || len(w.calls[0]) != maxLine+1 || len(w.calls[2]) != 11 {
		t.Fatalf("got %d writes of lengths %v", len(w.calls), lens(w.calls))
	}
	if strings.Join(w.calls, "") != long[:maxLine]+"\n"+long[maxLine:2*maxLine]+"\n"+long[2*maxLine:]+"\n" {
		t.Fatal("content changed")
	}
}

func lens(ss []string) []int {
	n := make([]int, len(ss))
	for i, s := range ss {
		n[i] = len(s)
	}
	return n
}

func TestOutputNeverInterleavesLines(t *testing.T) {
	// Four streams onto one buffer (as stdout and stderr may be one
	// terminal), written concurrently in odd-sized pieces.
	var buf bytes.Buffer
	o := newOutput(&buf, &buf, true)
	var wg sync.WaitGroup
	for r := range 4 {
		for _, errStream := range []bool{false, true} {
			lw := o.stream(r, errStream, nil)
			wg.Go(func() {
				var all []byte
				for i := range 200 {
					all = fmt.Appendf(all, "%d:%d:%s\n", r, i, strings.Repeat("y", 100+i))
				}
				for len(all) > 0 {
					n := min(len(all), 37)
					lw.Write(all[:n])
					all = all[n:]
				}
				lw.Flush()
			})
		}
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 4*2*200 {
		t.Fatalf("%d lines, want %d", len(lines), 4*2*200)
	}
	for _, l := range lines {
		var r, r2, i int
		var ys string
		if _, err := fmt.Sscanf(l, "[%d] %d:%d:%s", &r, &r2, &i, &ys); err != nil || r != r2 || ys != strings.Repeat("y", 100+i) {
			t.Fatalf("mangled line %q", l)
		}
	}
}

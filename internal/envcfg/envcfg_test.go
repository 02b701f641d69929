package envcfg

import (
	"strings"
	"testing"
	"time"
)

func TestReaderReportsEveryMalformedVariable(t *testing.T) {
	t.Setenv("T_INT", "7")
	t.Setenv("T_BADINT", "seven")
	t.Setenv("T_DUR", "30s")
	t.Setenv("T_BADDUR", "soon")
	t.Setenv("T_BOOL", "yes")
	t.Setenv("T_BADBOOL", "maybe")
	var r Reader
	n, bad, d, badd := 1, 1, time.Second, time.Second
	r.Int("T_INT", &n)
	r.Int("T_BADINT", &bad)
	r.Int("T_UNSET", &bad)
	r.Duration("T_DUR", &d)
	r.Duration("T_BADDUR", &badd)
	yes, unset, badb := false, true, true
	r.Bool("T_BOOL", &yes)
	r.Bool("T_UNSET", &unset)
	r.Bool("T_BADBOOL", &badb)
	if n != 7 || bad != 1 || d != 30*time.Second || badd != time.Second || !yes || !unset || !badb {
		t.Fatalf("n=%d bad=%d d=%v badd=%v yes=%t unset=%t badb=%t", n, bad, d, badd, yes, unset, badb)
	}
	err := r.Err()
	for _, name := range []string{"T_BADINT", "T_BADDUR", "T_BADBOOL"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("err = %v, want every bad variable named", err)
		}
	}
}

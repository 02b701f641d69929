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
	var r Reader
	n, bad, d, badd := 1, 1, time.Second, time.Second
	r.Int("T_INT", &n)
	r.Int("T_BADINT", &bad)
	r.Int("T_UNSET", &bad)
	r.Duration("T_DUR", &d)
	r.Duration("T_BADDUR", &badd)
	if n != 7 || bad != 1 || d != 30*time.Second || badd != time.Second || !r.Bool("T_BOOL") || r.Bool("T_UNSET") {
		t.Fatalf("n=%d bad=%d d=%v badd=%v", n, bad, d, badd)
	}
	err := r.Err()
	if err == nil || !strings.Contains(err.Error(), "T_BADINT") || !strings.Contains(err.Error(), "T_BADDUR") {
		t.Fatalf("err = %v, want both bad variables named", err)
	}
}

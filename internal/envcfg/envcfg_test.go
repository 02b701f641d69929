package envcfg

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/transport"
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

// A communicator whose Logger is the zero value logs warnings (to
// stderr) rather than nothing; a logger the caller set, zerolog.Nop()
// included, is kept.
func TestAZeroLoggerBecomesTheDefaultWarningLogger(t *testing.T) {
	c := Default(0, 1)
	c.WithDefaultLogger()
	if c.Logger.Warn() == nil || c.Logger.Info() != nil {
		t.Fatal("the zero logger did not become a warn-level logger")
	}
	c.Logger = zerolog.Nop()
	c.WithDefaultLogger()
	if c.Logger.Error() != nil {
		t.Fatal("zerolog.Nop() was replaced")
	}
}

// RINGTAIL_FRAME_AUTH reaches the engine's settings as the transport's
// protection (integrity when unset), and a value it does not know is
// refused naming the variable.
func TestFrameAuthSetting(t *testing.T) {
	for v, want := range map[string]transport.FrameAuth{"": transport.FrameAuthTag, "integrity": transport.FrameAuthTag,
		"off": transport.FrameAuthOff, "encrypt": transport.FrameAuthEncrypt} {
		c, err := FromLookup(func(name string) (string, bool) {
			switch name {
			case VarFrameAuth:
				return v, v != ""
			case VarRank:
				return "0", true
			case VarWorldSize:
				return "1", true
			}
			return "", false
		})
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if got := c.Frames(); got != want {
			t.Fatalf("%q: frames %v, want %v", v, got, want)
		}
	}
	c := Default(0, 1)
	c.FrameAuth = "on"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), VarFrameAuth) {
		t.Fatalf("frame auth %q: %v", c.FrameAuth, err)
	}
}

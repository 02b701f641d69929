package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ringtail-ml/ringtail/elastic"
	"github.com/ringtail-ml/ringtail/elastic/shard/service"
)

// --elastic refuses what does not apply to it and says what is missing;
// the run itself is tested under `ringtail run --elastic` in elastic/job.
func TestElasticModeRejectsBadUsage(t *testing.T) {
	t.Setenv(elastic.EnvElastic, "")
	t.Setenv(service.EnvAddr, "")
	t.Setenv("RINGTAIL_SECRET", "0123456789abcdef0123456789abcdef")
	t.Setenv("RINGTAIL_JOB_ID", "test-job")
	t.Setenv(elastic.EnvID, "h.0")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--elastic", "--mode", "adaptive"}, "the straggler driver (--mode adaptive) is not elastic"},
		{[]string{"--elastic", "--policy", "shares"}, "do not apply to --elastic"},
		{[]string{"--elastic", "--probe=false"}, "do not apply to --elastic"},
		{[]string{"--elastic"}, "$" + service.EnvAddr},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("ringtail-train %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// ringtail-train's help and usage errors read like every ringtail
// command's: a Usage line and every flag, one line naming the fix.
func TestHelpAndUsageErrorsAreOneStyle(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "Usage: ringtail-train") ||
		!strings.Contains(out.String(), "--eval-every") || errb.Len() != 0 {
		t.Fatalf("--help: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--epoch", "3"}, "ringtail-train: unknown flag --epoch; did you mean --epochs?"},
		{[]string{"--mode", "fast"}, `ringtail-train: --mode "fast": want bsp, adaptive or coded`},
		{[]string{"--mode", "bsp", "--coded-s", "2"}, "ringtail-train: --coded-s and --coded-scheme apply to --mode coded"},
		{[]string{"--mode", "coded", "--coded-scheme", "fountain"}, `ringtail-train: --coded-scheme "fountain": want hetero, group or cyclic`},
		{[]string{"--eval-every", "-1"}, "ringtail-train: --eval-every -1: want a number of steps ≥ 0"},
		{[]string{"--mode", "bsp", "--reassign-unit", "2"}, "ringtail-train: --reassign-unit, --reassign-helpers and --reassign-at apply to --mode adaptive"},
		{[]string{"--mode", "coded", "--reassign-at", "0.1"}, "ringtail-train: --reassign-unit, --reassign-helpers and --reassign-at apply to --mode adaptive"},
		{[]string{"--reassign-at", "NaN"}, "ringtail-train: --reassign-at NaN: want a finite fraction"},
		{[]string{"--reassign-unit", "-2"}, "ringtail-train: --reassign-unit -2: want ≥ 0 samples (0: off, -1: the default)"},
		{[]string{"--reassign-helpers", "-1"}, "ringtail-train: --reassign-unit -1 --reassign-helpers -1: straggler: reassign config"},
	} {
		out.Reset()
		errb.Reset()
		if code := run(tc.args, &out, &errb); code != 2 || !strings.HasPrefix(errb.String(), tc.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("ringtail-train %q: exit %d, stderr %q; want 2 and one line starting %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

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

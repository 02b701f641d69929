//go:build unix

package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringtail-ml/ringtail/elastic"
)

// `ringtail run --elastic` end to end with ringtail-train is tested in
// elastic/job; these are the CLI's own paths.

func TestRunCLIElasticRejectsBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-np", "2", "--min-np", "1", "--", "true"}, "--min-np needs --elastic"},
		{[]string{"-np", "2", "--host-discovery-script", "echo a", "--", "true"}, "--host-discovery-script needs --elastic"},
		{[]string{"--elastic", "-np", "2", "--timeline", "t.json", "--", "true"}, "--timeline is not supported with --elastic"},
		{[]string{"--elastic", "-np", "2", "--launcher", "srun", "--", "true"}, "--launcher is not supported with --elastic"},
		{[]string{"--elastic", "--", "true"}, "--min-np 0 must be in"},
		{[]string{"--elastic", "-np", "3", "--min-np", "2", "--max-np", "1", "--", "true"}, "--max-np 1 must be in --min-np 2"},
		{[]string{"--elastic", "-np", "1", "--min-np", "2", "--", "true"}, "-np 1 must be between --min-np 2"},
		{[]string{"--elastic", "-np", "2", "-H", "a:1", "--", "true"}, "-np 2 exceeds the 1 slots"},
		{[]string{"--elastic", "-np", "1", "-H", "a:1", "--host-discovery-script", "echo a", "--", "true"}, "not both"},
		{[]string{"--elastic", "-np", "1", "--max-restarts", "-1", "--", "true"}, "must not be negative"},
		{[]string{"--elastic", "-np", "1", "--env", "RINGTAIL_ELASTIC_ID=x", "--", "true"}, "set by the elastic launcher"},
	} {
		code, _, stderr := launchCLI(t, context.Background(), tc.args...)
		if code != 2 || !strings.HasPrefix(stderr, "ringtail run: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("ringtail run %q: exit %d, stderr %q; want 2 and one line mentioning %q", tc.args, code, stderr, tc.want)
		}
	}
}

// Ranks get the elastic contract, each slot its id, and the job ends
// with the status 0 of its ranks.
func TestRunCLIElasticRanksGetTheContract(t *testing.T) {
	code, stdout, _ := launchCLI(t, context.Background(), "--elastic", "-np", "2", "-H", "127.0.0.1:2", "--",
		"sh", "-c", `echo "id=$RINGTAIL_ELASTIC_ID elastic=$RINGTAIL_ELASTIC np=$RINGTAIL_ELASTIC_NP/$RINGTAIL_ELASTIC_MIN_NP/$RINGTAIL_ELASTIC_MAX_NP local=$LOCAL_RANK/$LOCAL_WORLD_SIZE shards=${RINGTAIL_SHARD_SERVICE:+set} seeds=${RINGTAIL_ELASTIC_SEEDS:+set}"`)
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	for _, want := range []string{
		"[127.0.0.1.0] id=127.0.0.1.0 elastic=1 np=2/2/2 local=0/2 shards=set seeds=set\n",
		"[127.0.0.1.1] id=127.0.0.1.1 elastic=1 np=2/2/2 local=1/2 shards=set seeds=set\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
}

// A crash blacklists the only host: every rank is gone before the job
// finished, and the job fails with ExitJobLost. A rank that says the
// job cannot go on fails it with the same status.
func TestRunCLIElasticJobLost(t *testing.T) {
	for _, tc := range []struct {
		rank string
		want string
	}{
		{"exit 3", "host 127.0.0.1 is blacklisted"},
		{"exit 79", "the job cannot go on"},
	} {
		code, _, stderr := launchCLI(t, context.Background(), "--elastic", "-np", "1", "-H", "127.0.0.1:1", "--", "sh", "-c", tc.rank)
		if code != elastic.ExitJobLost || !strings.Contains(stderr, tc.want) {
			t.Errorf("rank %q: exit %d, stderr %q; want %d and %q", tc.rank, code, stderr, elastic.ExitJobLost, tc.want)
		}
	}
}

// With --max-restarts a crashed rank is restarted in place (a new
// incarnation of its slot) instead of blacklisting its host.
func TestRunCLIElasticRestartsACrashedRank(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "crashed-once")
	code, stdout, stderr := launchCLI(t, context.Background(), "--elastic", "-np", "1", "-H", "127.0.0.1:1", "--max-restarts", "1", "--",
		"sh", "-c", `if [ -e "$0" ]; then echo second; exit 0; fi; touch "$0"; exit 3`, marker)
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	for _, want := range []string{"rank 127.0.0.1.0 exited with status 3; restarting it", "rank 127.0.0.1.0 restarted (incarnation 1)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if stdout != "[127.0.0.1.0] second\n" || strings.Contains(stderr, "blacklisted") {
		t.Errorf("stdout %q; want only the restarted rank's line, and no blacklisting", stdout)
	}
}

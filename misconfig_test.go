package ringtail

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/settings"
	"github.com/ringtail-ml/ringtail/internal/syncbuf"
)

// Every misconfiguration is said, in exactly one line that names the fix,
// by an error or a warning on the configuration's logger; none is
// silently ignored. The environment cases go through ConfigFromEnv's
// path (then Validate); the program cases start a communicator of two
// ranks on this host.
func TestEveryMisconfigurationIsSaidInOneLineNamingTheFix(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("from-a-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500"}
	secret := "RINGTAIL_SECRET=sixteen-byte-key"
	for _, tc := range []struct {
		name    string
		env     []string // over base
		program string   // a program case: Config.Algorithm of a two-rank communicator
		bytes   int      // its AllReduce (0: none, New is expected to fail)
		fix     string   // what the one line says
	}{
		{name: "a boolean that is none", env: []string{secret, "RINGTAIL_NO_SHM=maybe"},
			fix: `RINGTAIL_NO_SHM="maybe" is not a boolean: use ` + settings.BoolValues},
		{name: "a boolean the old rule ignored", env: []string{secret, "RINGTAIL_TOLERATE_DEATHS=enabled"},
			fix: `RINGTAIL_TOLERATE_DEATHS="enabled" is not a boolean: use ` + settings.BoolValues},
		{name: "RINGTAIL_INSECURE mistyped", env: []string{"RINGTAIL_INSECURE=y"},
			fix: `RINGTAIL_INSECURE="y" is not a boolean`},
		{name: "a misspelt name", env: []string{secret, "RINGTAIL_NO_SHMM=1"},
			fix: "RINGTAIL_NO_SHMM is not a ringtail setting; did you mean RINGTAIL_NO_SHM?"},
		{name: "another misspelt name", env: []string{secret, "RINGTAIL_TIMEOUTS=5m"},
			fix: "RINGTAIL_TIMEOUTS is not a ringtail setting; did you mean RINGTAIL_TIMEOUT?"},
		{name: "both secret sources", env: []string{secret, "RINGTAIL_SECRET_FILE=" + secretFile},
			fix: "RINGTAIL_SECRET and RINGTAIL_SECRET_FILE are both set: set one of them"},
		{name: "a short secret", env: []string{"RINGTAIL_SECRET=short"},
			fix: "at least 16 are needed (make one with `" + settings.MakeSecret + "`)"},
		{name: "a short secret file", env: []string{"RINGTAIL_SECRET_FILE=" + writeFile(t, "s\n")},
			fix: "at least 16 are needed (make one with `" + settings.MakeSecret + "`)"},
		{name: "two-level on one host", program: "two-level",
			fix: "two-level needs ranks on two or more hosts, as many on each (2 ranks here); set the algorithm to auto or ring"},
		{name: "ring-offload on one host", program: "ring-offload",
			fix: "ring-offload needs ranks on three or more hosts, one of them alone on its host (2 ranks here); set the algorithm to auto or ring"},
		{name: "ring-pieces at one piece", program: "ring-pieces", bytes: 64 << 10,
			fix: "RINGTAIL_ALGORITHM=ring-pieces does not apply to an AllReduce of 65536 B; it runs ring (set auto to let ringtail choose)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines []string
			if tc.program == "" {
				var logs syncbuf.Buffer
				c, err := configFromEnviron(append(append([]string{}, base...), tc.env...), &logs)
				if err == nil {
					err = c.Validate()
				}
				if err != nil {
					lines = append(lines, strings.Split(err.Error(), "\n")...)
				}
				lines = append(lines, strings.Split(strings.TrimSpace(logs.String()), "\n")...)
			} else {
				lines = programLines(t, tc.program, tc.bytes)
			}
			var naming []string
			for _, l := range lines {
				if strings.Contains(l, tc.fix) {
					naming = append(naming, l)
				}
			}
			if len(naming) != 1 {
				t.Fatalf("%d lines say %q, want exactly one; all lines:\n%s", len(naming), tc.fix, strings.Join(lines, "\n"))
			}
		})
	}
	// The control: a good environment says nothing.
	var logs syncbuf.Buffer
	c, err := configFromEnviron(append(append([]string{}, base...), secret, "RINGTAIL_NO_SHM=on", "RINGTAIL_INSECURE=off"), &logs)
	if err == nil {
		err = c.Validate()
	}
	if err != nil || logs.String() != "" || !c.DisableShm {
		t.Fatalf("a good environment: %v, logs %q, no shm %t", err, logs.String(), c.DisableShm)
	}
}

// writeFile writes content to a new file and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// programLines starts two ranks on this host with program set, rank 0
// logging; with bytes > 0 they run an AllReduce of that many bytes. It
// returns rank 0's error's lines, if any, and its log's.
func programLines(t *testing.T, program string, bytes int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logs syncbuf.Buffer
	comms, errs, err := joinLocal(ctx, 2, func(c *Config) {
		c.Secret, c.Algorithm, c.Logger = []byte("sixteen-byte-key"), program, zerolog.Nop()
		if c.Rank == 0 {
			c.Logger = zerolog.New(&logs).Level(zerolog.WarnLevel)
		}
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	if errs[0] != nil {
		lines = append(lines, strings.Split(errs[0].Error(), "\n")...)
	}
	for _, c := range comms {
		if c != nil {
			defer c.Close()
		}
	}
	if bytes > 0 {
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("%s: %v, %v", program, errs[0], errs[1])
		}
		var wg sync.WaitGroup
		runErrs := make([]error, 2)
		for r, c := range comms {
			wg.Go(func() { runErrs[r] = c.AllReduce(ctx, Float32s(make([]float32, bytes/4)), Sum) })
		}
		wg.Wait()
		if runErrs[0] != nil || runErrs[1] != nil {
			t.Fatalf("%s AllReduce: %v, %v", program, runErrs[0], runErrs[1])
		}
	}
	return append(lines, strings.Split(strings.TrimSpace(logs.String()), "\n")...)
}

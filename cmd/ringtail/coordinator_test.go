package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
)

// runTestBuffer is a bytes.Buffer safe for concurrent use.
type runTestBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *runTestBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *runTestBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestCoordinatorCLIServesExternalRanks(t *testing.T) {
	t.Setenv("RINGTAIL_SECRET", "cli-secret-0123456")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr runTestBuffer
	done := make(chan int, 1)
	go func() {
		done <- coordinatorMain(ctx, []string{"--listen", "127.0.0.1:0", "--np", "2", "--job-id", "cli-job"}, &stdout, &stderr)
	}()
	serving := regexp.MustCompile(`serving job "cli-job" for 2 ranks on 127\.0\.0\.1:(\d+)`)
	var port int
	for deadline := time.Now().Add(time.Minute); port == 0; time.Sleep(10 * time.Millisecond) {
		if m := serving.FindStringSubmatch(stderr.String()); m != nil {
			port, _ = strconv.Atoi(m[1])
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinator never said where it listens; stderr:\n%s", stderr.String())
		}
	}

	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	sums := make([]float32, 2)
	for r := range 2 {
		wg.Go(func() {
			c := ringtail.DefaultConfig(r, 2)
			c.MasterPort, c.ExternalCoordinator, c.Secret, c.JobID = port, true, []byte("cli-secret-0123456"), "cli-job"
			comm, err := ringtail.New(rctx, c)
			if err != nil {
				errs[r] = err
				return
			}
			defer comm.Close()
			buf := []float32{float32(10 * (r + 1))}
			errs[r] = comm.AllReduce(rctx, ringtail.Float32s(buf), ringtail.Sum)
			sums[r] = buf[0]
		})
	}
	wg.Wait()
	for r := range 2 {
		if errs[r] != nil || sums[r] != 30 {
			t.Fatalf("rank %d: sum %v, %v", r, sums[r], errs[r])
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("coordinator exit %d after SIGTERM-equivalent, want 0; stderr:\n%s", code, stderr.String())
	}
}

func TestCoordinatorCLIRejectsBadUsage(t *testing.T) {
	t.Setenv("RINGTAIL_SECRET", "sixteen-byte-key")
	t.Setenv("RINGTAIL_JOB_ID", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--listen is required"},
		{[]string{"--listen", "127.0.0.1:0"}, "-np is required"},
		{[]string{"--listen", "127.0.0.1:0", "--np", "x"}, `-np "x" is not a whole number`},
		{[]string{"--listen", "127.0.0.1:0", "-np", "0"}, "-np 0: a job needs at least one rank"},
		{[]string{"--listen", ":29500", "--np", "2"}, "give a job id"},
		{[]string{"--listen", "nowhere", "--np", "2"}, "missing port"},
		{[]string{"--listen", "127.0.0.1:0", "--np", "2", "extra"}, `unexpected argument "extra"`},
		{[]string{"--listen", "127.0.0.1:0", "--np", "2", "--secret-file", "/nonexistent"}, "--secret-file"},
	} {
		var stdout, stderr runTestBuffer
		code := coordinatorMain(context.Background(), tc.args, &stdout, &stderr)
		if code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("ringtail coordinator %q: exit %d, stderr %q; want 2 and one line mentioning %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	t.Setenv("RINGTAIL_SECRET", "")
	t.Setenv("RINGTAIL_SECRET_FILE", "")
	var stdout, stderr runTestBuffer
	if code := coordinatorMain(context.Background(), []string{"--listen", "127.0.0.1:0", "--np", "2"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "no job secret") {
		t.Fatalf("without a secret: exit %d, stderr %q", code, stderr.String())
	}
}

func TestCoordinatorCLIHelp(t *testing.T) {
	var stdout, stderr runTestBuffer
	if code := coordinatorMain(context.Background(), []string{"--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Usage: ringtail coordinator") {
		t.Fatalf("exit %d, stdout %q", code, stdout.String())
	}
}

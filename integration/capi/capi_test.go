//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/citest"
	"github.com/ringtail-ml/ringtail/internal/commtest"
)

func freePort(t *testing.T) int { return commtest.FreePort(t) }

func overridesFor(rank, world, port int, extra ...string) string {
	lines := []string{
		"RANK=" + strconv.Itoa(rank), "WORLD_SIZE=" + strconv.Itoa(world),
		"LOCAL_RANK=" + strconv.Itoa(rank), "LOCAL_WORLD_SIZE=" + strconv.Itoa(world),
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(port),
		"RINGTAIL_SECRET=capi-test-secret-0123", "RINGTAIL_COORDINATOR=", "RINGTAIL_TIMEOUT=20s",
		"RINGTAIL_CONNECT_TIMEOUT=20s",
	}
	return strings.Join(append(lines, extra...), "\n")
}

// openWorld opens world sessions in one process, one goroutine per rank.
func openWorld(t *testing.T, world int, extra ...string) []*session {
	t.Helper()
	port := freePort(t)
	ss := make([]*session, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() { ss[r], errs[r] = open(overridesFor(r, world, port, extra...)) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, s := range ss {
			if s != nil {
				s.cancel()
				s.close()
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return ss
}

// each runs f on every rank concurrently and fails on any error.
func each(t *testing.T, ss []*session, f func(r int, s *session) error) {
	t.Helper()
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	for r, s := range ss {
		wg.Go(func() { errs[r] = f(r, s) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestParseOverrides(t *testing.T) {
	kv, err := parseOverrides("A=1\n\nB= x=y \r\n")
	if err != nil || kv["A"] != "1" || kv["B"] != " x=y " || len(kv) != 2 {
		t.Fatalf("got %v, %v", kv, err)
	}
	for _, bad := range []string{"A", "=1", "A=1\nA=2"} {
		if _, err := parseOverrides(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestConfigOverrides(t *testing.T) {
	cfg, err := configFromEnv(overridesFor(2, 4, 4567, "RINGTAIL_CHANNELS=2", "RINGTAIL_JOB_ID="))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Rank != 2 || cfg.WorldSize != 4 || cfg.MasterPort != 4567 || cfg.Channels != 2 || cfg.OpTimeout != 20*time.Second || string(cfg.Secret) != "capi-test-secret-0123" {
		t.Fatalf("config %+v", cfg)
	}
	cfg, err = configFromEnv(overridesFor(0, 2, 4567))
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("RINGTAIL_JOB_ID") == "" && cfg.JobID != "job@127.0.0.1:4567" {
		t.Errorf("job id %q not derived from the overridden address", cfg.JobID)
	}
	_, err = configFromEnv("RANK=x\nNO_SUCH=1\nRINGTAIL_TIMEOUT=soon")
	for _, want := range []string{"RANK", "NO_SUCH", "RINGTAIL_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	if _, err := open("WORLD_SIZE=0"); code(err) != codeInit {
		t.Errorf("open with a bad config: code %d (%v), want %d", code(err), err, codeInit)
	}
}

// TestEveryKindHasItsCode: each kind of *ringtail.Error maps to a code of
// its own (none to RT_ERR_OTHER), wrapped or not, so a C or Python caller
// can branch on every failure the communicator names.
func TestEveryKindHasItsCode(t *testing.T) {
	seen := map[int]ringtail.Kind{}
	for k := ringtail.KindPeerDied; !strings.HasPrefix(k.String(), "kind("); k++ {
		err := fmt.Errorf("allreduce: %w", &ringtail.Error{Kind: k, Rank: 1})
		c := code(err)
		if c == codeOther {
			t.Errorf("kind %v maps to RT_ERR_OTHER", k)
			continue
		}
		if prev, ok := seen[c]; ok {
			t.Errorf("kinds %v and %v share code %d", prev, k, c)
		}
		seen[c] = k
	}
	if c := code(&ringtail.Error{Kind: ringtail.KindIntegrity}); c != codeIntegrity {
		t.Errorf("KindIntegrity: code %d, want RT_ERR_INTEGRITY (%d)", c, codeIntegrity)
	}
}

// TestHeaderMatches keeps include/ringtail.h and the Go constants equal.
func TestHeaderMatches(t *testing.T) {
	b, err := os.ReadFile("include/ringtail.h")
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define (RT_[A-Z0-9_]+) (\d+)`).FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.Atoi(m[2])
		defs[m[1]] = n
	}
	want := map[string]int{
		"RT_ABI_VERSION": abiVersion, "RT_OK": codeOK, "RT_ERR_INVALID": codeInvalid, "RT_ERR_INIT": codeInit,
		"RT_ERR_PEER_DIED": codePeerDied, "RT_ERR_SILENT": codeSilent, "RT_ERR_TIMEOUT": codeTimeout,
		"RT_ERR_MISMATCH": codeMismatch, "RT_ERR_CANCELED": codeCanceled, "RT_ERR_PROTOCOL": codeProtocol,
		"RT_ERR_CLOSED": codeClosed, "RT_ERR_AUTH": codeAuth, "RT_ERR_LOCAL": codeLocal, "RT_ERR_OTHER": codeOther,
		"RT_ERR_INTEGRITY": codeIntegrity,
		"RT_MAX_TAG":       ringtail.MaxTag,
	}
	for name, code := range map[string]int{"RT_FLOAT32": 1, "RT_FLOAT64": 2, "RT_INT32": 3, "RT_INT64": 4, "RT_FLOAT16": 5, "RT_BFLOAT16": 6, "RT_UINT8": 7} {
		d, ok := dtypeOf(code)
		if !ok || d.String() != strings.ToLower(strings.TrimPrefix(name, "RT_")) {
			t.Errorf("%s=%d maps to %v", name, code, d)
		}
		want[name] = code
	}
	for name, code := range map[string]int{"RT_SUM": 1, "RT_PROD": 2, "RT_MIN": 3, "RT_MAX": 4, "RT_AVG": 5} {
		o, ok := opOf(code)
		if !ok || o.String() != strings.ToLower(strings.TrimPrefix(name, "RT_")) {
			t.Errorf("%s=%d maps to %v", name, code, o)
		}
		want[name] = code
	}
	for name, v := range want {
		if got, ok := defs[name]; !ok || got != v {
			t.Errorf("ringtail.h: %s = %d (defined %v), Go has %d", name, got, ok, v)
		}
	}
}

func TestCollectives(t *testing.T) {
	const world = 3
	ss := openWorld(t, world)
	// allreduce float32 (ring-sized) with sum and avg
	const n = 20000
	each(t, ss, func(r int, s *session) error {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r + 1)
		}
		if err := s.allReduce(unsafe.Pointer(&v[0]), n, 1, 1); err != nil {
			return err
		}
		for i, x := range v {
			if x != 6 {
				return fmt.Errorf("rank %d: sum[%d] = %v", r, i, x)
			}
		}
		if err := s.allReduce(unsafe.Pointer(&v[0]), n, 1, 5); err != nil {
			return err
		}
		if v[n-1] != 6 {
			return fmt.Errorf("rank %d: avg = %v", r, v[n-1])
		}
		return nil
	})
	// broadcast, allgather in place, reduce-scatter with recv inside send
	each(t, ss, func(r int, s *session) error {
		b := []int64{int64(r), int64(r)}
		if err := s.broadcast(unsafe.Pointer(&b[0]), 2, 4, 1); err != nil {
			return err
		}
		if b[0] != 1 || b[1] != 1 {
			return fmt.Errorf("rank %d: broadcast %v", r, b)
		}
		g := make([]int32, 2*world)
		g[2*r], g[2*r+1] = int32(10*r), int32(10*r+1)
		if err := s.allGather(unsafe.Pointer(&g[2*r]), unsafe.Pointer(&g[0]), 2, 3); err != nil {
			return err
		}
		for i, x := range g {
			if want := int32(10*(i/2) + i%2); x != want {
				return fmt.Errorf("rank %d: gather[%d] = %d, want %d", r, i, x, want)
			}
		}
		sd := make([]float64, world)
		for i := range sd {
			sd[i] = float64(i * (r + 1))
		}
		if err := s.reduceScatter(unsafe.Pointer(&sd[0]), unsafe.Pointer(&sd[0]), 1, 2, 4); err != nil {
			return err
		}
		if want := float64(r * world); sd[0] != want {
			return fmt.Errorf("rank %d: reduce_scatter max %v, want %v", r, sd[0], want)
		}
		return s.barrier()
	})
}

func TestAllToAll(t *testing.T) {
	const world = 3
	ss := openWorld(t, world)
	each(t, ss, func(r int, s *session) error {
		// equal blocks of 2, in place (send and recv are one buffer)
		v := make([]int32, 2*world)
		for q := range world {
			v[2*q], v[2*q+1] = int32(10*r+q), int32(-10*r-q)
		}
		if err := s.allToAll(unsafe.Pointer(&v[0]), unsafe.Pointer(&v[0]), 2, 3); err != nil {
			return err
		}
		for q := range world {
			if v[2*q] != int32(10*q+r) || v[2*q+1] != int32(-10*q-r) {
				return fmt.Errorf("rank %d: alltoall block %d = %v", r, q, v[2*q:2*q+2])
			}
		}
		// uneven: rank r sends q+1 elements to rank q
		sc, rc := make([]int64, world), make([]int64, world)
		var send []float64
		for q := range world {
			sc[q], rc[q] = int64(q+1), int64(r+1)
			for i := range q + 1 {
				send = append(send, float64(100*r+i))
			}
		}
		recv := make([]float64, world*(r+1))
		if err := s.allToAllV(unsafe.Pointer(&send[0]), unsafe.Pointer(&sc[0]), unsafe.Pointer(&recv[0]), unsafe.Pointer(&rc[0]), 2); err != nil {
			return err
		}
		for q := range world {
			for i := range r + 1 {
				if got := recv[q*(r+1)+i]; got != float64(100*q+i) {
					return fmt.Errorf("rank %d: alltoallv from %d elem %d = %v", r, q, i, got)
				}
			}
		}
		return nil
	})
}

func TestPointToPointRequests(t *testing.T) {
	const world = 3
	ss := openWorld(t, world)
	each(t, ss, func(r int, s *session) error {
		// a ring: everyone sends right and receives from any source
		out := []int64{int64(r), int64(r * r)}
		snd, err := s.isend(unsafe.Pointer(&out[0]), 2, 4, (r+1)%world, 5)
		if err != nil {
			return err
		}
		in := make([]int64, 2)
		rcv, err := s.irecv(unsafe.Pointer(&in[0]), 2, 4, ringtail.AnySource, 5)
		if err != nil {
			return err
		}
		if _, _, err := snd.wait(-1); err != nil {
			return err
		}
		fin, src, err := rcv.wait(20 * time.Second)
		if err != nil || !fin {
			return fmt.Errorf("rank %d: receive finished=%v: %w", r, fin, err)
		}
		left := (r + world - 1) % world
		if src != left || in[0] != int64(left) || in[1] != int64(left*left) {
			return fmt.Errorf("rank %d: got %v from %d", r, in, src)
		}
		// a receive nobody sends to times out and stays valid, then is withdrawn
		never, err := s.irecv(unsafe.Pointer(&in[0]), 2, 4, left, 6)
		if err != nil {
			return err
		}
		if fin, _, err := never.wait(10 * time.Millisecond); fin || code(err) != codeTimeout {
			return fmt.Errorf("rank %d: unmatched receive: finished=%v code %d (%v)", r, fin, code(err), err)
		}
		never.recv.Cancel()
		if fin, _, err := never.wait(-1); !fin || code(err) != codeCanceled {
			return fmt.Errorf("rank %d: canceled receive: finished=%v code %d (%v)", r, fin, code(err), err)
		}
		// a message larger than the receive fails the receive only
		if r == 0 {
			big := make([]int64, 3)
			snd, err := s.isend(unsafe.Pointer(&big[0]), 3, 4, 1, 7)
			if err != nil {
				return err
			}
			if _, _, err = snd.wait(-1); err != nil {
				return err
			}
		}
		if r == 1 {
			small := make([]int64, 2)
			q, err := s.irecv(unsafe.Pointer(&small[0]), 2, 4, 0, 7)
			if err != nil {
				return err
			}
			if _, _, err := q.wait(-1); code(err) != codeMismatch || !strings.Contains(err.Error(), "3 × int64") {
				return fmt.Errorf("oversized message: code %d (%v)", code(err), err)
			}
		}
		return s.barrier()
	})
	// bad arguments are refused up front
	x := []int64{1}
	for name, err := range map[string]error{
		"self":   func() error { _, err := ss[0].isend(unsafe.Pointer(&x[0]), 1, 4, 0, 0); return err }(),
		"tag":    func() error { _, err := ss[0].irecv(unsafe.Pointer(&x[0]), 1, 4, 1, -2); return err }(),
		"source": func() error { _, err := ss[0].irecv(unsafe.Pointer(&x[0]), 1, 4, 7, 0); return err }(),
	} {
		if code(err) != codeInvalid {
			t.Errorf("%s: code %d (%v), want %d", name, code(err), err, codeInvalid)
		}
	}
}

func TestMonitoredBarrier(t *testing.T) {
	ss := openWorld(t, 3)
	each(t, ss, func(r int, s *session) error { return s.mail.MonitoredBarrier(s.ctx, 20*time.Second, true) })
	err := ss[0].mail.MonitoredBarrier(ss[0].ctx, 50*time.Millisecond, true)
	if code(err) != codeTimeout || !strings.Contains(err.Error(), "Ranks 1, 2 failed to pass monitoredBarrier in 50 ms") {
		t.Fatalf("rank 0 alone: code %d (%v)", code(err), err)
	}
}

func TestInvalidArgumentsKeepTheCommunicator(t *testing.T) {
	ss := openWorld(t, 2)
	x := []float32{1}
	p := unsafe.Pointer(&x[0])
	for name, err := range map[string]error{
		"dtype":   ss[0].allReduce(p, 1, 0, 1),
		"op":      ss[0].allReduce(p, 1, 1, 9),
		"count":   ss[0].allReduce(p, -1, 1, 1),
		"nil":     ss[0].allReduce(nil, 1, 1, 1),
		"root":    ss[0].broadcast(p, 1, 1, 2),
		"gather":  ss[0].allGather(p, nil, 1, 1),
		"scatter": ss[0].reduceScatter(nil, p, 1, 1, 1),
	} {
		if code(err) != codeInvalid {
			t.Errorf("%s: code %d (%v), want %d", name, code(err), err, codeInvalid)
		}
	}
	each(t, ss, func(r int, s *session) error {
		v := []float32{float32(r)}
		if err := s.allReduce(unsafe.Pointer(&v[0]), 1, 1, 1); err != nil {
			return err
		}
		if v[0] != 1 {
			return fmt.Errorf("rank %d: %v", r, v[0])
		}
		return nil
	})
}

// TestAbort: a rank waiting for a peer that never comes is released by
// abort at once, with the canceled code.
func TestAbort(t *testing.T) {
	ss := openWorld(t, 2)
	done := make(chan error, 1)
	go func() {
		v := []float32{1}
		done <- ss[0].allReduce(unsafe.Pointer(&v[0]), 1, 1, 1)
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	ss[0].cancel()
	select {
	case err := <-done:
		if c := code(err); c != codeCanceled {
			t.Errorf("aborted allreduce: code %d (%v), want %d", c, err, codeCanceled)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("abort took %v", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("abort did not release the allreduce")
	}
}

// TestCProgram builds the shared library and testdata/capi_test.c and runs
// it as a 2-rank and a 3-rank job.
func TestCProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a shared library")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		citest.Missing(t, "no gcc (the C test program cannot be built)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	lib := filepath.Join(dir, "libringtail.so")
	build := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-o", lib, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "capi_test")
	// libringtail.so leaves NVML's symbols undefined (go-nvml dlopens
	// libnvidia-ml.so.1 at Init; see doc.go): the program links with
	// --allow-shlib-undefined and binds them lazily, as on a GPU-less host.
	cc := exec.CommandContext(ctx, gcc, "-std=c99", "-Wall", "-Werror", "-Iinclude", "-o", bin,
		"testdata/capi_test.c", "-L"+dir, "-lringtail", "-lpthread", "-Wl,-rpath,"+dir, "-Wl,--allow-shlib-undefined")
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	for _, world := range []int{2, 3} {
		port := freePort(t)
		cmds := make([]*exec.Cmd, world)
		outs := make([]strings.Builder, world)
		for r := range world {
			c := exec.CommandContext(ctx, bin)
			c.Env = append(os.Environ(), "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(world),
				"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(world),
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "RINGTAIL_INSECURE=1",
				"RINGTAIL_TIMEOUT=30s", "RINGTAIL_CONNECT_TIMEOUT=30s", "RINGTAIL_COORDINATOR=", "RINGTAIL_SECRET=", "RINGTAIL_JOB_ID=")
			c.Stdout, c.Stderr = &outs[r], &outs[r]
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[r] = c
		}
		for r, c := range cmds {
			err := c.Wait()
			out := outs[r].String()
			if err != nil || !strings.Contains(out, fmt.Sprintf("ok rank %d", r)) {
				t.Errorf("world %d rank %d: %v\n%s", world, r, err, out)
			}
		}
	}
}

// The C API's communicator logs through the process logger: warn by
// default (refused peers show), RINGTAIL_LOG_LEVEL (an override too) to
// change it, a malformed level an error naming the variable.
func TestConfigLogger(t *testing.T) {
	cfg, err := configFromEnv(overridesFor(1, 2, 4567))
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("RINGTAIL_LOG_LEVEL") == "" && cfg.Logger.GetLevel() != zerolog.WarnLevel {
		t.Errorf("default level %v, want warn", cfg.Logger.GetLevel())
	}
	cfg, err = configFromEnv(overridesFor(1, 2, 4567, "RINGTAIL_LOG_LEVEL=debug"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger.GetLevel() != zerolog.DebugLevel {
		t.Errorf("level %v, want the override's debug", cfg.Logger.GetLevel())
	}
	if _, err := configFromEnv(overridesFor(1, 2, 4567, "RINGTAIL_LOG_LEVEL=loud")); err == nil || !strings.Contains(err.Error(), "RINGTAIL_LOG_LEVEL") {
		t.Errorf("bad level: %v", err)
	}
}

// Under RINGTAIL_DEBUG=detail the call sites rt_call_site names are
// compared before each collective: alike, the call runs; a rank that
// names another site (it skipped a call of the same shape) fails every
// rank with a mismatch naming both sites.
func TestCallSitesAreComparedUnderDetail(t *testing.T) {
	ss := openWorld(t, 2, "RINGTAIL_DEBUG=detail")
	bufs := [2][]float32{make([]float32, 4), make([]float32, 4)}
	each(t, ss, func(r int, s *session) error {
		s.setSite("train.py:10 (step)")
		return s.allReduce(unsafe.Pointer(&make([]float32, 4)[0]), 4, 1, 1)
	})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, s := range ss {
		wg.Go(func() {
			s.setSite([]string{"train.py:10 (step)", "train.py:12 (step)"}[r])
			errs[r] = s.allReduce(unsafe.Pointer(&bufs[r][0]), 4, 1, 1)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if code(err) != codeMismatch || !strings.Contains(err.Error(), "train.py:10 (step)") || !strings.Contains(err.Error(), "train.py:12 (step)") {
			t.Errorf("rank %d: %v (code %d), want a mismatch naming both call sites", r, err, code(err))
		}
	}
}

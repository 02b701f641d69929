package faults

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ringtail-ml/ringtail/integration/faults/event"
)

// Flood opens connections to one address as a stranger would, half of
// them idle and half sending garbage, and holds them until Close.
type Flood struct {
	addr    string
	want    int
	mu      sync.Mutex
	conns   []net.Conn // guarded by mu
	opened  atomic.Int64
	failed  atomic.Int64
	stopped atomic.Bool
	done    chan struct{}
}

// StartFlood opens n connections to addr with 32 dialers.
func StartFlood(addr string, n int) *Flood {
	f := &Flood{addr: addr, want: n, done: make(chan struct{})}
	var next atomic.Int64
	var wg sync.WaitGroup
	garbage := make([]byte, 1024)
	_, _ = rand.Read(garbage)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) || f.stopped.Load() {
					return
				}
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					f.failed.Add(1)
					continue
				}
				if i%2 == 0 {
					_ = c.SetWriteDeadline(time.Now().Add(time.Second))
					_, _ = c.Write(garbage)
				}
				f.mu.Lock()
				f.conns = append(f.conns, c)
				f.mu.Unlock()
				f.opened.Add(1)
			}
		}()
	}
	go func() { wg.Wait(); close(f.done) }()
	return f
}

// Opened returns how many connections were opened so far; Failed how
// many dials failed.
func (f *Flood) Opened() int { return int(f.opened.Load()) }

// Failed returns how many dials failed.
func (f *Flood) Failed() int { return int(f.failed.Load()) }

// Wait waits until every connection has been attempted.
func (f *Flood) Wait() { <-f.done }

// Close stops dialling and closes every connection.
func (f *Flood) Close() {
	f.stopped.Store(true)
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
}

// RSS returns the resident set size of process pid, from /proc.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("faults: no VmRSS for pid %d", pid)
}

// rssSampler records the largest RSS of a process.
type rssSampler struct {
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := RSS(pid); err == nil && v > s.peak.Load() {
				s.peak.Store(v)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) Stop() int64 {
	close(s.stop)
	<-s.done
	return s.peak.Load()
}

// baselineRSS is the largest RSS of pid over d (the target at rest).
func baselineRSS(pid int, d time.Duration) int64 {
	s := sampleRSS(pid)
	time.Sleep(d)
	return s.Stop()
}

// FloodResult is the outcome of one flood.
type FloodResult struct {
	Target     string
	Conns      int   // connections attempted
	Opened     int   // connections established
	DialErrors int   // dials refused or timed out
	RSSBefore  int64 // bytes, the target at rest
	RSSPeak    int64 // bytes, during the flood
	JobOK      bool  // the real job started during the flood completed correctly
	Job        string
	Refusals   int // refusal lines the target logged (rate-limited)
	Took       time.Duration
	Err        error
}

// Growth is the RSS growth during the flood.
func (f FloodResult) Growth() int64 { return f.RSSPeak - f.RSSBefore }

// refusalLines counts the target's log lines about refused connections.
func refusalLines(log string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "refused") {
			n++
		}
	}
	return n
}

// waitEvents waits until ok holds for the job's events, or d passes.
func waitEvents(j *Job, d time.Duration, ok func([]event.Event) bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok(j.Events()) {
			return true
		}
		select {
		case <-j.done:
			return ok(j.Events())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

func countEv(evs []event.Event, kind string) int {
	n := 0
	for _, e := range evs {
		if e.Ev == kind {
			n++
		}
	}
	return n
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// jobSummary describes a finished job's outcome.
func jobSummary(np, exit int, evs []event.Event) (bool, string) {
	done := countEv(evs, event.Done)
	ok := exit == 0 && done == np && countEv(evs, event.Wrong) == 0
	s := fmt.Sprintf("exit %d, %d/%d ranks done", exit, done, np)
	for _, e := range evs {
		if e.Err != "" && (e.Ev == event.Setup || e.Ev == event.Failed || e.Ev == event.Wrong) {
			s += fmt.Sprintf("; rank %d: %s", e.Rank, e.Err)
			break
		}
	}
	return ok, s
}

// FloodRendezvous floods the coordinator `ringtail run` hosts (control
// plane plane: libp2p or tcp) with conns connections, and starts a real
// np-rank job through it halfway: the ranks wait for a file before they
// register. The target is the launcher process.
func FloodRendezvous(bins Binaries, dir, plane string, np, conns int) (res FloodResult) {
	res = FloodResult{Target: "rendezvous (" + plane + ")", Conns: conns}
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	port, err := freePort()
	if err != nil {
		res.Err = err
		return res
	}
	goFile := filepath.Join(dir, fmt.Sprintf("go-%d", port))
	j, err := StartJob(bins, np, []string{"--master-port", strconv.Itoa(port), "--control-plane", plane}, nil,
		[]string{"-steps", "20", "-elems", "4096", "-wait-file", goFile})
	if err != nil {
		res.Err = err
		return res
	}
	defer j.Kill()
	if !waitEvents(j, 30*time.Second, func(e []event.Event) bool { return countEv(e, event.Started) == np }) {
		res.Err = fmt.Errorf("the ranks did not start: %s", j.Stderr())
		return res
	}
	res.RSSBefore = baselineRSS(j.LauncherPID(), 300*time.Millisecond)
	rss := sampleRSS(j.LauncherPID())
	f := StartFlood(fmt.Sprintf("127.0.0.1:%d", port), conns)
	for f.Opened()+f.Failed() < conns/2 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		res.Err = err
	}
	f.Wait()
	exit, killed := j.Wait(120 * time.Second)
	res.RSSPeak = rss.Stop()
	f.Close()
	res.Opened, res.DialErrors = f.Opened(), f.Failed()
	res.JobOK, res.Job = jobSummary(np, exit, j.Events())
	if killed {
		res.JobOK, res.Job = false, "hung; killed"
	}
	res.Refusals = refusalLines(j.Stderr())
	return res
}

// listeningPorts returns the TCP ports process pid listens on.
func listeningPorts(pid int) ([]int, error) {
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A: LISTEN
				continue
			}
			i := strings.LastIndexByte(f[1], ':')
			p, err := strconv.ParseUint(f[1][i+1:], 16, 16)
			if err == nil {
				ports = append(ports, int(p))
			}
		}
	}
	return ports, nil
}

// FloodRank floods the data-plane listener of rank 0 of a running np-rank
// TCP job; the job must complete with correct results. The target is
// rank 0's process.
func FloodRank(bins Binaries, np, conns int) (res FloodResult) {
	res = FloodResult{Target: "rank data plane (tcp)", Conns: conns}
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	sc := Scenario{Transport: TransportTCP, PeerTimeout: 2 * time.Second}
	j, err := StartJob(bins, np, nil, sc.Env(), []string{"-steps", "400", "-elems", "4096", "-pace", "10ms"})
	if err != nil {
		res.Err = err
		return res
	}
	defer j.Kill()
	if !waitEvents(j, 30*time.Second, func(e []event.Event) bool { return countEv(e, event.Ready) == np }) {
		res.Err = fmt.Errorf("the job did not form: %s", j.Stderr())
		return res
	}
	pid := j.PID(0)
	ports, err := listeningPorts(pid)
	if err != nil || len(ports) == 0 {
		res.Err = fmt.Errorf("rank 0 (pid %d) listens on no TCP port once the mesh is formed (%v)", pid, err)
		j.Wait(120 * time.Second)
		return res
	}
	res.RSSBefore = baselineRSS(pid, 300*time.Millisecond)
	rss := sampleRSS(pid)
	f := StartFlood(fmt.Sprintf("127.0.0.1:%d", ports[0]), conns)
	f.Wait()
	exit, killed := j.Wait(120 * time.Second)
	res.RSSPeak = rss.Stop()
	f.Close()
	res.Opened, res.DialErrors = f.Opened(), f.Failed()
	res.JobOK, res.Job = jobSummary(np, exit, j.Events())
	if killed {
		res.JobOK, res.Job = false, "hung; killed"
	}
	res.Refusals = refusalLines(j.Stderr())
	return res
}

// FloodShardService floods a shard service (the worker's shard-service
// role, storing in dir) and, halfway, starts clients workers that must
// complete every shard. The target is the service's process.
func FloodShardService(ctx context.Context, bins Binaries, dir string, clients, conns int) (res FloodResult) {
	res = FloodResult{Target: "shard service", Conns: conns}
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	env := append(os.Environ(), "RINGTAIL_SECRET="+hex.EncodeToString(secret))
	const shards = 200
	srv := exec.Command(bins.Worker, "-role", "shard-service", "-dir", dir, "-shards", strconv.Itoa(shards))
	srv.Env = env
	logs := &lockedBuffer{}
	srv.Stderr = logs
	out, err := srv.StdoutPipe()
	if err != nil {
		res.Err = err
		return res
	}
	if err := srv.Start(); err != nil {
		res.Err = err
		return res
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	sc := bufio.NewScanner(out)
	var addr string
	for sc.Scan() {
		var e event.Event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Ev == event.Listening {
			addr = e.Addr
			break
		}
	}
	if addr == "" {
		res.Err = fmt.Errorf("the shard service did not start: %s", logs.String())
		return res
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(nopWriter{}) }()
	res.RSSBefore = baselineRSS(srv.Process.Pid, 300*time.Millisecond)
	rss := sampleRSS(srv.Process.Pid)
	f := StartFlood(addr, conns)
	for f.Opened()+f.Failed() < conns/2 {
		time.Sleep(5 * time.Millisecond)
	}
	cctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	completed, failures := 0, []string{}
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := exec.CommandContext(cctx, bins.Worker, "-role", "shard-client", "-addr", addr)
			c.Env = env
			b, err := c.Output()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, fmt.Sprintf("%v: %s", err, b))
				return
			}
			var e event.Event
			if json.Unmarshal(b, &e) == nil && e.Ev == event.Done {
				completed += e.N
			}
		}()
	}
	f.Wait()
	wg.Wait()
	res.RSSPeak = rss.Stop()
	f.Close()
	res.Opened, res.DialErrors = f.Opened(), f.Failed()
	res.JobOK = len(failures) == 0 && completed == shards
	res.Job = fmt.Sprintf("%d/%d shards completed by %d clients", completed, shards, clients)
	if len(failures) > 0 {
		res.Job += "; failures: " + strings.Join(failures, "; ")
	}
	_ = srv.Process.Signal(syscall.SIGTERM)
	res.Refusals = refusalLines(logs.String())
	return res
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

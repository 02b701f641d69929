package elastic_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/bench/recovery"
	"github.com/ringtail-ml/ringtail/elastic"
	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/elastic/shard/service"
	"github.com/ringtail-ml/ringtail/elastic/shard/wal"
)

// The shard end-to-end test: elastic worker processes (under a Supervisor
// that restarts crashed ones) pull shards from the shard service (another
// process, its state in a WAL), train them batch by batch in lock-step
// all-reduces, and record every sample index they trained to a file. The
// test kills random workers with SIGKILL during the epoch, and the service
// once (restarted from its directory on the same address). At the end the
// service must count K shards DONE and the files must hold every index.

const (
	envShardAddr    = "RINGTAIL_ELASTIC_TEST_SHARD_ADDR"
	envShardDir     = "RINGTAIL_ELASTIC_TEST_SHARD_DIR"
	envShardTrained = "RINGTAIL_ELASTIC_TEST_TRAINED_DIR"

	e2eSamples   = 4000
	e2eShardSize = 100
	e2eBatch     = 20
)

func e2eShardConfig() shard.Config {
	return shard.Config{Samples: e2eSamples, ShardSize: e2eShardSize, Epochs: 1, Shuffle: true, Seed: 7}
}

// shardServiceMain serves the shard queue stored in $envShardDir on
// $envShardAddr until killed.
func shardServiceMain() int {
	secret := []byte(os.Getenv(ringtail.EnvSecret))
	store, err := wal.Open(os.Getenv(envShardDir), e2eShardConfig(), wal.Options{SnapshotEvery: 16})
	if err != nil {
		fmt.Fprintln(os.Stderr, "shard service:", err)
		return 1
	}
	srv, err := service.NewServer(service.ServerConfig{Secret: secret, RestartGrace: 3 * time.Second}, store)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shard service:", err)
		return 1
	}
	var ln net.Listener
	// The killed server's port may take a moment to free (longer on a
	// loaded machine): retry for up to a minute.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if ln, err = net.Listen("tcp", os.Getenv(envShardAddr)); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shard service:", err)
		return 1
	}
	fmt.Println(`{"ev":"ready"}`)
	if err := srv.Serve(context.Background(), ln); err != nil {
		fmt.Fprintln(os.Stderr, "shard service:", err)
		return 1
	}
	return 0
}

// batch is a batch this rank trained in step, not yet known to be
// committed by rank 0.
type batch struct {
	step     uint64
	from, to int // positions in the held shard's indices
	last     bool
}

// shardTrainer is a worker's data state: the shard it holds, its position
// in it, and the batches awaiting global commit.
type shardTrainer struct {
	client   *service.Client
	worker   string
	out      *os.File
	held     *shard.Shard
	idx      []int64
	pos      int
	pending  []batch
	owesDone bool // every batch of held is recorded; Done not yet acknowledged
	finished bool // Pull said every epoch is DONE
}

// rollback drops the batches of step and later (rank 0 did not commit
// them) so that they are trained again.
func (s *shardTrainer) rollback(step uint64) {
	keep := s.pending[:0]
	for _, b := range s.pending {
		if b.step >= step {
			s.pos = min(s.pos, b.from)
			continue
		}
		keep = append(keep, b)
	}
	s.pending = keep
}

// commit records the batches of steps before step (committed by rank 0),
// keeps the later ones pending, and reports the held shard DONE once its
// last batch is recorded.
func (s *shardTrainer) commit(ctx context.Context, step uint64) error {
	keep := s.pending[:0]
	for _, b := range s.pending {
		if b.step >= step {
			keep = append(keep, b)
			continue
		}
		var line strings.Builder
		fmt.Fprintf(&line, "# shard %d [%d,%d) step %d last %v\n", s.held.ID, b.from, b.to, b.step, b.last)
		for _, i := range s.idx[b.from:b.to] {
			line.WriteString(strconv.FormatInt(i, 10))
			line.WriteByte('\n')
		}
		if _, err := s.out.WriteString(line.String()); err != nil {
			return err
		}
		if b.last {
			s.owesDone = true
		}
	}
	s.pending = keep
	return s.reportDone(ctx)
}

func (s *shardTrainer) reportDone(ctx context.Context) error {
	if !s.owesDone {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := s.client.Done(ctx, s.worker, s.held.ID); err != nil {
		if errors.Is(err, service.ErrUnavailable) || ctx.Err() != nil {
			return nil // the service is down: try again next step
		}
		return err
	}
	s.owesDone, s.held, s.idx, s.pos = false, nil, nil, 0
	return nil
}

// next returns the batch to train this step, pulling a shard if none is
// held (a worker holds one shard until its DONE is acknowledged). The
// position moves past it only once the step's all-reduce succeeds.
func (s *shardTrainer) next(ctx context.Context, step uint64) (b batch, ok bool, err error) {
	if s.held == nil && !s.finished {
		ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		sh, err := s.client.Pull(ctx, s.worker)
		cancel()
		switch {
		case err == nil:
			s.held, s.idx, s.pos = &sh, sh.Indices(), 0
		case errors.Is(err, shard.ErrFinished):
			s.finished = true
		case errors.Is(err, shard.ErrNoShard), errors.Is(err, service.ErrUnavailable), ctx.Err() != nil:
		default:
			return b, false, err
		}
	}
	if s.held == nil || s.owesDone || s.pos >= len(s.idx) {
		return b, false, nil
	}
	end := min(s.pos+e2eBatch, len(s.idx))
	return batch{step: step, from: s.pos, to: end, last: end == len(s.idx)}, true, nil
}

func (s *shardTrainer) busy() bool {
	return !s.finished || s.held != nil || len(s.pending) > 0
}

// shardWorkerMain is an elastic rank that trains the shard service's data.
func shardWorkerMain() int {
	cfg, err := elastic.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if os.Getenv("ELASTIC_TEST_LOG") != "" {
		cfg.Logger = testLogger().With().Str("id", cfg.ID).Logger()
	}
	ctx := context.Background()
	client, err := service.NewClient(service.ClientConfig{Addr: os.Getenv(envShardAddr), Secret: cfg.Secret,
		DialTimeout: 500 * time.Millisecond, CallTimeout: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer client.Close()
	// A replacement started after the epoch ended has nothing to do.
	if st, err := client.Stats(ctx); err == nil && st.Finished {
		return 0
	}
	w, err := elastic.Join(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "join:", err)
		return elastic.ExitCode(err)
	}
	defer w.Close()
	f, err := os.OpenFile(filepath.Join(os.Getenv(envShardTrained), "trained-"+w.Name()+".txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	st := &shardTrainer{client: client, worker: w.Name(), out: f}
	model := make([]float64, 8)
	enc := bufio.NewWriter(os.Stdout)
	err = w.Run(ctx, func(ctx context.Context, comm *ringtail.Comm, g elastic.Generation) error {
		if g.Fresh {
			if err := comm.Broadcast(ctx, ringtail.Float64s(model), 0); err != nil {
				return err
			}
		}
		// Batches of steps before g.Step are committed by rank 0: within a
		// generation that is known once this step's all-reduce completes;
		// at a fresh generation, now.
		if g.Rejoined {
			st.rollback(0) // nothing pending is known to be committed
		}
		if g.Fresh {
			st.rollback(g.Step)
			if err := st.commit(ctx, g.Step); err != nil {
				return err
			}
		} else if err := st.reportDone(ctx); err != nil {
			return err
		}
		b, ok, err := st.next(ctx, g.Step)
		if err != nil {
			return err
		}
		if err := ringtail.Sleep(ctx, 10*time.Millisecond); err != nil { // compute
			return err
		}
		grad := make([]float64, len(model)+1)
		if ok {
			for _, i := range st.idx[b.from:b.to] {
				grad[i%int64(len(model))] += 1e-6 * float64(i)
			}
		}
		if st.busy() || ok {
			grad[len(model)] = 1
		}
		if err := comm.AllReduce(ctx, ringtail.Float64s(grad), ringtail.Sum); err != nil {
			return err // not committed here: the batch is trained again
		}
		for i := range model {
			model[i] -= grad[i]
		}
		if ok {
			st.pending = append(st.pending, b)
			st.pos = b.to
		}
		if err := st.commit(ctx, g.Step); err != nil {
			return err
		}
		fmt.Fprintf(enc, `{"ev":"step","id":%q,"gen":%d,"rank":%d,"size":%d,"step":%d,"t":%d}`+"\n",
			cfg.ID, g.Number, g.Rank, g.Size, g.Step, time.Now().UnixNano())
		enc.Flush()
		if grad[len(model)] == 0 {
			return elastic.ErrStop // every rank is out of data
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
	}
	return elastic.ExitCode(err)
}

// TestShardEndToEndUnderKills is the kill test described above; run it
// with -count=20 for the soak recorded in docs/elastic.md.
func TestShardEndToEndUnderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process soak")
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("kill schedule seed %d", seed)
	j := newJob(t)
	dir := t.TempDir()
	walDir, trainedDir := filepath.Join(dir, "wal"), filepath.Join(dir, "trained")
	if err := os.MkdirAll(trainedDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 4)
	svcAddr := fmt.Sprintf("127.0.0.1:%d", ports[3])
	seeds := seedList(ports[:3])
	svcEnv := append(os.Environ(), envTestRole+"=shard-service", envShardDir+"="+walDir, envShardAddr+"="+svcAddr,
		ringtail.EnvSecret+"="+j.secret)
	startService := func(inc int) {
		j.start(fmt.Sprintf("svc#%d", inc), svcEnv)
		j.waitAll(20*time.Second, "the shard service", []string{fmt.Sprintf("svc#%d", inc)}, func(e recovery.RankEvent) bool { return e.Event == "ready" })
	}
	startService(0)

	var pidMu sync.Mutex
	pids := map[int]int{}
	sup, err := elastic.NewSupervisor(elastic.SupervisorConfig{
		Slots: 3, RestartFailed: true, StopGrace: 2 * time.Second, DrainTimeout: 20 * time.Second,
		Command: func(slot, inc int) (*exec.Cmd, error) {
			id := fmt.Sprintf("w-%d", slot)
			env := j.env(id, seeds[slot], seeds, 3, 1, envTestRole+"=shard-worker",
				envShardAddr+"="+svcAddr, envShardTrained+"="+trainedDir)
			return j.command(fmt.Sprintf("%s#%d", id, inc), env), nil
		},
		OnEvent: func(e elastic.SupervisorEvent) {
			if e.Started {
				pidMu.Lock()
				pids[e.Slot] = e.PID
				pidMu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sup.Run(ctx) }()

	client, err := service.NewClient(service.ClientConfig{Addr: svcAddr, Secret: []byte(j.secret), DialTimeout: 500 * time.Millisecond, CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	k := e2eShardConfig().NumShards()
	// waitDone polls the service until at least n shards are DONE.
	waitDone := func(n int64) {
		t.Helper()
		for {
			st, err := client.Stats(ctx)
			if err == nil && (st.DoneTotal >= n || st.Finished) {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("waiting for %d DONE shards: %v", n, ctx.Err())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	killWorker := func() {
		time.Sleep(time.Duration(rng.IntN(120)) * time.Millisecond) // land anywhere in a shard
		slot := rng.IntN(3)
		pidMu.Lock()
		pid := pids[slot]
		pidMu.Unlock()
		t.Logf("kill -9 worker slot %d (pid %d)", slot, pid)
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
	}
	waitDone(k / 5)
	killWorker()
	waitDone(2 * k / 5)
	t.Logf("kill -9 shard service")
	j.kill("svc#0")
	time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
	startService(1)
	waitDone(3 * k / 5)
	killWorker()

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("supervisor: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the job did not finish")
	}
	st, err := client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.DoneTotal != k || !st.Finished {
		t.Fatalf("service stats %+v: DONE %d, want K = %d, finished", st, st.DoneTotal, k)
	}
	trained := make([]bool, e2eSamples)
	files, _ := filepath.Glob(filepath.Join(trainedDir, "trained-*.txt"))
	records := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			i, err := strconv.ParseInt(line, 10, 64)
			if err != nil || i < 0 || i >= e2eSamples {
				t.Fatalf("%s: bad record %q", f, line)
			}
			trained[i] = true
			records++
		}
	}
	var missing []int
	for i, ok := range trained {
		if !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "# shard "+strconv.Itoa(missing[0]/e2eShardSize)+" ") {
					t.Logf("%s: %s", filepath.Base(f), line)
				}
			}
		}
		t.Fatalf("%d sample indices never trained, e.g. %v", len(missing), missing[:min(10, len(missing))])
	}
	t.Logf("DONE %d = K; %d records over %d files for %d samples (%d duplicates); requeued %d, duplicate DONEs %d",
		st.DoneTotal, records, len(files), e2eSamples, records-e2eSamples, st.Requeued, st.Duplicates)
}

package job

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/elastic"
	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/elastic/shard/service"
	"github.com/ringtail-ml/ringtail/elastic/shard/wal"
	"github.com/ringtail-ml/ringtail/internal/fsperm"
	"github.com/ringtail-ml/ringtail/internal/launch"
)

// Run runs the elastic job cfg describes until it finishes, fails or ctx
// ends, and returns its exit status with an error saying why it is not 0:
// 0 once a rank finished (the data is all trained) and the others
// followed (or were stopped after Drain); elastic.ExitJobLost when a rank
// says the job cannot go on or every rank is gone; launch.ExitInterrupted
// when ctx ended; launch.ExitUsage for an invalid cfg; launch.ExitFailure
// when the launcher itself fails or no host appears within
// ElasticTimeout. The notices go to cfg.Stderr as they happen. When Run
// returns no rank it started runs (remote ones stop within their grace
// period, their watcher seeing the launcher's end of the pipe close).
func Run(ctx context.Context, cfg Config) (int, error) {
	cfg = cfg.withDefaults()
	r := &runner{cfg: cfg, log: cfg.Logger, outMu: &sync.Mutex{}}
	if r.cfg.Stdout == nil {
		r.cfg.Stdout = discard{}
	}
	if r.cfg.Stderr == nil {
		r.cfg.Stderr = discard{}
	}
	if err := cfg.Validate(); err != nil {
		r.notice(err.Error())
		return launch.ExitUsage, err
	}
	code, err := r.run(ctx)
	if err != nil && code != 0 {
		r.notice(err.Error())
	}
	return code, err
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// runner is one Run. Its fields are owned by the goroutine that called
// Run (the loop).
type runner struct {
	cfg   Config
	log   zerolog.Logger
	outMu *sync.Mutex

	code    int
	err     error
	decided bool
	members map[string]bool // slot ids of the newest generation the observer saw
}

// notice writes one line of the launcher's own to Stderr.
func (r *runner) notice(msg string) {
	msg = strings.ReplaceAll(strings.TrimPrefix(msg, "job: "), "\n", "; ")
	r.outMu.Lock()
	defer r.outMu.Unlock()
	_, _ = fmt.Fprintf(r.cfg.Stderr, "%s: %s\n", r.cfg.Name, msg)
}

// fail records the job's outcome, unless one is recorded already.
func (r *runner) fail(code int, err error) {
	if !r.decided {
		r.code, r.err, r.decided = code, err, true
	}
}

// hostDone is a host's Supervisor returning.
type hostDone struct {
	host string
	err  error
}

func (r *runner) run(ctx context.Context) (int, error) {
	cfg := r.cfg
	secret, jobID := cfg.Secret, cfg.JobID
	var err error
	if len(secret) == 0 {
		if secret, err = launch.NewSecret(); err != nil {
			return launch.ExitFailure, err
		}
	}
	if jobID == "" {
		if jobID, err = launch.NewJobID(); err != nil {
			return launch.ExitFailure, err
		}
	}

	// Host discovery runs for the whole job; the first list decides the
	// launcher's address when none is given.
	discCtx, stopDisc := context.WithCancel(ctx)
	defer stopDisc()
	lists := make(chan []launch.HostSlots)
	d := &discoverer{static: cfg.Hosts, script: cfg.DiscoveryScript, slots: cfg.SlotsPerHost, interval: cfg.DiscoveryInterval,
		timeout: max(10*cfg.DiscoveryInterval, 30*time.Second), log: r.log, warn: r.notice}
	discDone := make(chan struct{})
	go func() {
		defer close(discDone)
		d.run(discCtx, lists)
	}()
	defer func() { stopDisc(); <-discDone }()
	first, code, err := r.firstHosts(ctx, lists)
	if err != nil {
		return code, err
	}
	master, ip, err := masterAddress(cfg.MasterAddr, first)
	if err != nil {
		return launch.ExitFailure, err
	}

	// The observer (every rank's seed) and the shard service.
	obs, err := elastic.Observe(elastic.ObserverConfig{JobID: jobID, Secret: secret, BindAddr: ip, BindPort: cfg.MasterPort,
		Timers: elastic.DefaultTimers(), Logger: r.log})
	if err != nil {
		return launch.ExitFailure, fmt.Errorf("job: %w", err)
	}
	defer obs.Close()
	stateDir, err := stateDirFor(cfg, jobID)
	if err != nil {
		return launch.ExitFailure, fmt.Errorf("job: state directory: %w", err)
	}
	r.notice(fmt.Sprintf("job %s: shard state in %s (kept after the job: a launcher restarted with the same job id resumes from it)", jobID, stateDir))
	srv, err := service.NewServer(service.ServerConfig{Secret: secret, Logger: r.log, Open: func(c shard.Config) (*wal.Store, error) {
		return wal.Open(stateDir, c, wal.Options{Logger: r.log})
	}}, nil)
	if err != nil {
		return launch.ExitFailure, fmt.Errorf("job: %w", err)
	}
	shardPort := 0
	if cfg.MasterPort > 0 {
		shardPort = cfg.MasterPort + 1
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(shardPort)))
	if err != nil {
		return launch.ExitFailure, fmt.Errorf("job: shard service: %w", err)
	}
	srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(srvCtx, ln) }()
	defer func() { stopSrv(); <-srvDone }()
	r.log.Debug().Str("seed", obs.Addr()).Str("shards", ln.Addr().String()).Str("state", stateDir).Msg("job: services up")

	dir := cfg.Dir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	svc := &services{
		seed: obs.Addr(), shards: ln.Addr().String(), master: master, jobID: jobID, secret: secret, dir: dir, localDir: cfg.Dir,
		outMu: r.outMu, stdout: cfg.Stdout, stderr: cfg.Stderr, prefix: cfg.PrefixOutput, ssh: cfg.SSH, sshMode: cfg.SSHMode,
		grace: cfg.Grace, np: cfg.NP, minNP: cfg.MinNP, maxNP: cfg.MaxNP, timeout: cfg.Timeout, waitFor: cfg.ElasticTimeout,
		env: cfg.Env, command: cfg.Command,
	}
	r.loop(ctx, first, lists, obs, srv, svc)
	r.report(srv)
	if !r.decided {
		return 0, nil
	}
	return r.code, r.err
}

// firstHosts waits for a host list with at least one host.
func (r *runner) firstHosts(ctx context.Context, lists <-chan []launch.HostSlots) ([]launch.HostSlots, int, error) {
	deadline := time.NewTimer(r.cfg.ElasticTimeout)
	defer deadline.Stop()
	for {
		select {
		case h := <-lists:
			if len(h) > 0 {
				return h, 0, nil
			}
		case <-deadline.C:
			return nil, launch.ExitFailure, fmt.Errorf("job: host discovery found no host within %v", r.cfg.ElasticTimeout)
		case <-ctx.Done():
			return nil, launch.ExitInterrupted, fmt.Errorf("job: interrupted: %w", context.Cause(ctx))
		}
	}
}

// masterAddress returns the launcher's address as ranks see it and the
// IP the observer and the shard service listen on.
func masterAddress(configured string, hosts []launch.HostSlots) (addr, ip string, err error) {
	addr = configured
	if addr == "" {
		addr = "127.0.0.1"
		for _, h := range hosts {
			if !launch.IsLocalHost(h.Host) {
				addr = launch.AddrToward(h.Host)
				break
			}
		}
	}
	if p := net.ParseIP(addr); p != nil {
		return addr, p.String(), nil
	}
	ips, err := net.LookupIP(addr)
	if err != nil || len(ips) == 0 {
		return "", "", fmt.Errorf("job: the launcher's address %q does not resolve to an IP (give --master-addr): %v", addr, err)
	}
	for _, p := range ips {
		if p.To4() != nil {
			return addr, p.String(), nil
		}
	}
	return addr, ips[0].String(), nil
}

// loop owns the placement and the host supervisors until every
// supervisor has ended and the job is decided.
func (r *runner) loop(ctx context.Context, first []launch.HostSlots, lists <-chan []launch.HostSlots,
	obs *elastic.Observer, srv *service.Server, svc *services) {
	cfg := r.cfg
	place := newPlacement(cfg.MaxNP)
	if cfg.MaxNP == 0 {
		place = newPlacement(launch.MaxRanks)
	}
	place.discover(first)
	events := make(chan rankEvent, 256)
	done := make(chan hostDone)
	cancels := map[string]context.CancelFunc{}
	supCfg := elastic.SupervisorConfig{RestartFailed: cfg.MaxRestarts > 0, MaxRestarts: cfg.MaxRestarts, StopGrace: cfg.Grace,
		DrainTimeout: cfg.Drain, Logger: r.log}
	started := false  // a rank ever started
	finished := false // a rank finished: the data is all trained
	stopping := false // everything is being stopped
	var drain, noHost <-chan time.Time
	stopAll := func() {
		stopping = true
		place.finish()
		for _, c := range cancels {
			c()
		}
	}
	apply := func() {
		start, stop := place.actions()
		for _, h := range stop {
			if c := cancels[h]; c != nil {
				c()
			}
		}
		for _, h := range start {
			hr := &hostRanks{host: h, remote: !launch.IsLocalHost(h.Host), svc: svc, events: events, procs: map[[2]int]*rankProc{}}
			hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			cancels[h.Host] = cancel
			started = true
			r.notice(fmt.Sprintf("starting %d rank(s) on %s", h.Slots, h))
			go func() { done <- hostDone{host: h.Host, err: superviseHost(hctx, hr, supCfg)} }()
		}
	}
	apply()
	ctxDone := ctx.Done()
	obsEvents := obs.Events()
	for place.active() || (!r.decided && !finished) {
		if !place.active() && noHost == nil {
			if started {
				// Every rank is gone: nobody holds the model any more.
				r.fail(elastic.ExitJobLost, errors.New("job: every rank is gone before the job finished; its model is lost"))
				break
			}
			noHost = time.After(cfg.ElasticTimeout)
		}
		select {
		case h := <-lists:
			place.discover(h)
		case ev := <-events:
			r.rankEvent(ev, place, &finished, stopping, cancels)
			if finished && drain == nil {
				drain = time.After(cfg.Drain)
				place.finish()
			}
			if r.decided && !stopping {
				stopAll()
			}
		case d := <-done:
			place.ended(d.host)
			delete(cancels, d.host)
			if d.err != nil && !errors.Is(d.err, context.Canceled) {
				r.log.Debug().Err(d.err).Str("host", d.host).Msg("job: host supervisor ended")
			}
		case e, ok := <-obsEvents:
			if !ok {
				obsEvents = nil
				continue
			}
			r.observed(ctx, e, srv)
		case <-drain:
			r.notice(fmt.Sprintf("ranks still running %v after the job finished; stopping them", cfg.Drain))
			stopAll()
		case <-noHost:
			r.fail(launch.ExitFailure, fmt.Errorf("job: no host to run ranks on within %v", cfg.ElasticTimeout))
		case <-ctxDone:
			ctxDone = nil
			r.fail(launch.ExitInterrupted, fmt.Errorf("job: interrupted: %w", context.Cause(ctx)))
			r.notice("interrupted; stopping the ranks")
			stopAll()
		}
		if !stopping {
			apply()
			if place.active() {
				noHost = nil
			}
		}
	}
	stopAll()
	for place.active() { // supervisors stopped above report their end
		select {
		case d := <-done:
			place.ended(d.host)
		case ev := <-events:
			r.rankEvent(ev, place, &finished, true, cancels)
		}
	}
}

// rankEvent handles a rank's start or exit.
func (r *runner) rankEvent(ev rankEvent, place *placement, finished *bool, stopping bool, cancels map[string]context.CancelFunc) {
	e := ev.e
	name := id(ev.host, e.Slot)
	if e.Started {
		r.log.Debug().Str("rank", name).Int("incarnation", e.Incarnation).Int("pid", e.PID).Msg("job: rank started")
		if e.Incarnation > 0 {
			r.notice(fmt.Sprintf("rank %s restarted (incarnation %d)", name, e.Incarnation))
		}
		return
	}
	switch {
	case e.ExitCode == 0:
		if !*finished {
			r.notice(fmt.Sprintf("rank %s finished; waiting for the others", name))
		}
		*finished = true
	case stopping || *finished || place.stopping[ev.host]:
	case e.ExitCode == elastic.ExitJobLost && (r.members == nil || r.members[name]):
		// A member of the newest generation gave up: the job cannot go
		// on. (One outside it — cut off from the others, alone below
		// min-np — is a crash like any other.)
		r.fail(elastic.ExitJobLost, fmt.Errorf("job: rank %s exited with status %d: the job cannot go on (below --min-np for too long, or its model is lost)", name, e.ExitCode))
	case e.Restart:
		r.notice(fmt.Sprintf("rank %s exited with %s; restarting it", name, status(e.ExitCode)))
	default:
		r.notice(fmt.Sprintf("rank %s exited with %s; host %s is blacklisted (until host discovery drops it and lists it again)", name, status(e.ExitCode), ev.host))
		place.crashed(ev.host)
	}
}

func status(code int) string {
	if code < 0 {
		return "a signal"
	}
	return "status " + strconv.Itoa(code)
}

// observed handles what the observer saw: a new generation is announced;
// a node the failure detector declared dead has its shard released
// (its connection to the shard service may stay open when its host is cut
// off).
func (r *runner) observed(ctx context.Context, e elastic.ObserverEvent, srv *service.Server) {
	switch {
	case e.View != nil:
		ids := make([]string, len(e.View.Members))
		r.members = map[string]bool{}
		for i, m := range e.View.Members {
			ids[i] = slotOf(m)
			r.members[ids[i]] = true
		}
		r.notice(fmt.Sprintf("generation %d: %d ranks: %s", e.View.Gen, len(ids), strings.Join(ids, " ")))
	case e.Left != "":
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		requeued, err := srv.Release(cctx, e.Left)
		switch {
		case errors.Is(err, service.ErrNotOpen):
		case err != nil:
			r.notice(fmt.Sprintf("node %s left; releasing its shard: %v", slotOf(e.Left), err))
		case len(requeued) > 0:
			r.notice(fmt.Sprintf("node %s left; its shard %v is back in TODO", slotOf(e.Left), requeued))
		}
	}
}

// slotOf strips a node name's incarnation suffix: the rank's slot id.
func slotOf(node string) string {
	if i := strings.LastIndexByte(node, '.'); i > 0 && len(node)-i == 17 {
		return node[:i]
	}
	return node
}

// report writes the shard service's final numbers.
func (r *runner) report(srv *service.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := srv.Stats(ctx)
	if err != nil {
		if !errors.Is(err, service.ErrNotOpen) {
			r.notice(fmt.Sprintf("shard service: %v", err))
		}
		return
	}
	state := "finished"
	if !st.Finished {
		state = fmt.Sprintf("not finished (epoch %d: %d TODO, %d DOING)", st.Epoch+1, st.Todo, st.Doing)
	}
	r.notice(fmt.Sprintf("shards: %d of %d DONE (%d per epoch × %d epochs), %s; %d pulls, %d requeued, %d duplicate DONE reports",
		st.DoneTotal, st.ShardsPerEpoch*int64(st.Epochs), st.ShardsPerEpoch, st.Epochs, state, st.Pulls, st.Requeued, st.Duplicates))
}

// StateDirName is where, under the job's working directory, the shard
// service keeps its write-ahead log by default:
// StateDirName/<job id>/shards.
const StateDirName = ".ringtail"

// DefaultStateDir is the shard service's state directory for job jobID
// when Config.StateDir is empty: workDir/.ringtail/<jobID>/shards.
func DefaultStateDir(workDir, jobID string) string {
	return filepath.Join(workDir, StateDirName, jobID, "shards")
}

// stateDirFor returns the shard service's state directory, creating it
// (and its missing parents) 0700: Config.StateDir, else DefaultStateDir
// of the launcher's working directory (not Config.Dir, which may exist
// only on the ranks' hosts). It outlives the launcher, so a launcher
// restarted with the same job id finds the shards where the last one
// left them.
func stateDirFor(cfg Config, jobID string) (string, error) {
	dir := cfg.StateDir
	if dir == "" {
		if jobID == "" || jobID == "." || jobID == ".." || strings.ContainsAny(jobID, `/\`) {
			return "", fmt.Errorf("job id %q cannot name a directory; give one without '/' (or a state directory)", jobID)
		}
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		dir = DefaultStateDir(wd, jobID)
	}
	if err := fsperm.MkdirAll(dir); err != nil {
		return "", err
	}
	return dir, nil
}

package obs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/exec"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/nvml"
	"github.com/ringtail-ml/ringtail/observe"
)

// Config configures one rank's Recorder.
type Config struct {
	// Rank and World place the rank in its job.
	Rank, World int
	// Host names the rank's host (default: os.Hostname).
	Host string
	// MetricsAddr is the host:port this rank serves /metrics (Prometheus),
	// /events (the dashboard's stream) and /info on; port 0 picks a free
	// one (Addr tells which). Empty: no server. Beyond loopback (another
	// interface, or every one) it needs Secret.
	MetricsAddr string
	// Secret is the job secret. When MetricsAddr is beyond loopback,
	// every request must carry its endpoint token (Token; see auth.go) and
	// is refused with 401 without it; without a secret such an address is
	// a configuration error (ErrOpenEndpoint).
	Secret []byte
	// Timeline is the path of this rank's Chrome-trace file; empty: none.
	Timeline string
	// Period is how often busbw, host and GPU telemetry are sampled and
	// the timeline is flushed (default 1s).
	Period time.Duration
	// History bounds the events kept for subscribers that attach late
	// (default 8192).
	History int
	// GPU is the GPU telemetry to sample (nil: none); Close closes it.
	GPU nvml.Telemetry
	// HostProc is the /proc file system host telemetry reads (nil: the
	// real one; tests give a fake).
	HostProc nvml.HostConfig
	// Logger receives the recorder's own problems (a failed scrape
	// listener, a timeline write error).
	Logger zerolog.Logger
	// Flight writes the rank's flight recorder as JSON, its last last
	// calls when last is positive (internal/flight), served at
	// /debug/flight; nil: not served.
	Flight func(w io.Writer, last int) error
}

// Validate reports every invalid field.
func (c *Config) Validate() error {
	var errs []error
	if c.World < 1 || c.Rank < 0 || c.Rank >= c.World {
		errs = append(errs, fmt.Errorf("rank %d of world %d", c.Rank, c.World))
	}
	if c.MetricsAddr != "" {
		if err := CheckAddr(c.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("metrics address: %w", err))
		} else if err := CheckExposure(c.MetricsAddr, "metrics address (RINGTAIL_METRICS_ADDR, Config.MetricsAddr)", c.Secret); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Period < 0 || c.History < 0 {
		errs = append(errs, fmt.Errorf("period %v and history %d must not be negative", c.Period, c.History))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("obs: invalid config: %w", err)
	}
	return nil
}

// CheckAddr reports whether addr is a host:port a server can listen on.
func CheckAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("%q: bad host %q", addr, host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q: port %q is not in 0..65535", addr, port)
	}
	return nil
}

// Recorder observes one rank: it implements exec.Tracer (every call's
// count, bytes, latency and busbw, failures by kind; the call's phases on
// the timeline), records training steps (observe.StepEvent), serves
// metrics and the event stream, and samples host and GPU telemetry. The
// call methods are called by the engine one call at a time; RecordStep,
// SetLinks and Close may be called from any goroutine.
type Recorder struct {
	cfg     Config
	m       *metrics
	tl      *timeline // nil: no timeline
	hub     *hub
	started time.Time
	ranks   []string // rank labels

	// The running call (owned by the engine's call lock, as are rng and
	// the counters' writes).
	call struct {
		info    exec.CallInfo
		timed   bool
		begin   time.Duration // since started, on the monotonic clock
		arrived time.Duration // 0: not reported
		nph     int
		phases  [8]phaseMark
	}
	rng       uint64        // xorshift state: which calls are timed
	mask      atomic.Uint64 // time a call when rng&mask == 0 (End widens it, the sampler resets it)
	lastTimed time.Duration // when the last timed call ended

	stepMu sync.Mutex
	links  []LinkInfo

	srv      *http.Server
	ln       net.Listener
	stop     chan struct{}
	done     chan struct{}
	closeMu  sync.Mutex
	closed   bool
	closeErr error
}

type phaseMark struct {
	ph plan.Phase
	at time.Duration // since started
}

// LinkInfo is one link and its transport.
type LinkInfo struct {
	Peer      int    `json:"peer"`
	Channel   int    `json:"channel"`
	Transport string `json:"transport"`
	// Fallback says why the link is slower than it could be (a failed
	// shared-memory upgrade); the dashboard shows it.
	Fallback string `json:"fallback,omitempty"`
}

var _ exec.Tracer = (*Recorder)(nil)
var _ observe.StepRecorder = (*Recorder)(nil)
var _ observe.ProgressRecorder = (*Recorder)(nil)

// New validates cfg, opens the timeline and starts the server and the
// sampler. Close releases them.
func New(cfg Config) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	if cfg.Period == 0 {
		cfg.Period = time.Second
	}
	if cfg.History == 0 {
		cfg.History = 8192
	}
	if cfg.HostProc.Proc == nil {
		cfg.HostProc = nvml.DefaultHostConfig()
	}
	r := &Recorder{cfg: cfg, m: newMetrics(cfg.Rank, cfg.World, cfg.Host), hub: newHub(cfg.History), started: time.Now(),
		stop: make(chan struct{}), done: make(chan struct{}), rng: uint64(time.Now().UnixNano()) | 1}
	for i := 0; i < cfg.World; i++ {
		r.ranks = append(r.ranks, strconv.Itoa(i))
	}
	if cfg.Timeline != "" {
		tl, err := openTimeline(cfg.Timeline, cfg.Rank, cfg.Host, r.started)
		if err != nil {
			return nil, err
		}
		r.tl = tl
	}
	if cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			if r.tl != nil {
				r.tl.closeFile()
			}
			return nil, fmt.Errorf("obs: rank %d: serving metrics on %s: %w", cfg.Rank, cfg.MetricsAddr, err)
		}
		r.ln = ln
		h := r.Handler()
		if !IsLoopback(cfg.MetricsAddr) {
			h = requireToken(Token(cfg.Secret), false, h)
		}
		r.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go r.srv.Serve(ln)
	}
	r.publishInfo()
	go r.sample()
	return r, nil
}

// Addr returns the address the metrics server listens on ("" when off).
func (r *Recorder) Addr() string {
	if r.ln == nil {
		return ""
	}
	return r.ln.Addr().String()
}

// TracesPhases reports whether the recorder uses the executor's phase
// reports (Arrived, Phase): only a timeline does, so without one the
// executor need not make them.
func (r *Recorder) TracesPhases() bool { return r.tl != nil }

// Observing implements observe.StepRecorder.
func (r *Recorder) Observing() bool { return r != nil }

// Begin implements exec.Tracer. Counting a call costs two plain stores;
// timing it, two reads of the monotonic clock (100–150 ns on a VM) and a
// histogram update. So when calls come faster than timedPerSecond, a
// random 1 in mask+1 of them is timed: the latency histogram and busbw are
// then an unbiased sample, counts and bytes stay exact. End widens the
// mask as soon as timed calls come closer than half the target interval
// (a burst of small calls is sampled after a few of them); the sampler
// sets it from each period's call rate (so it narrows again when calls
// slow down). With a timeline every call is timed.
func (r *Recorder) Begin(c exec.CallInfo) {
	r.call.info = c
	r.rng ^= r.rng << 13
	r.rng ^= r.rng >> 7
	r.rng ^= r.rng << 17
	r.call.timed = r.rng&r.mask.Load() == 0 || r.tl != nil
	if r.call.timed {
		r.call.nph, r.call.arrived = 0, 0
		r.call.begin = time.Since(r.started)
	}
}

// timedPerSecond is about how many calls a second are timed when calls
// are frequent: their clock reads cost ≤ 0.05% of the time. maxMask
// bounds the sampling to 1 call in 2^20.
const (
	timedPerSecond = 2000
	maxMask        = 1<<20 - 1
)

// Arrived implements exec.Tracer.
func (r *Recorder) Arrived() {
	if r.tl != nil {
		r.call.arrived = time.Since(r.started)
	}
}

// Phase implements exec.Tracer.
func (r *Recorder) Phase(ph plan.Phase) {
	if r.tl != nil && r.call.nph < len(r.call.phases) {
		r.call.phases[r.call.nph] = phaseMark{ph, time.Since(r.started)}
		r.call.nph++
	}
}

// End implements exec.Tracer.
func (r *Recorder) End(err error) {
	ci := &r.call.info
	c := ci.Desc.Collective
	if int(c) < maxCollective && r.m.coll[c].duration != nil {
		cm := &r.m.coll[c]
		cm.count.add(c, ci.Bytes, ci.Ranks, ci.Ranks == r.cfg.World)
		if r.call.timed {
			now := time.Since(r.started)
			if now-r.lastTimed < time.Second/timedPerSecond/2 {
				r.mask.Store(min(r.mask.Load()<<1|1, maxMask))
			}
			r.lastTimed = now
			sec := (now - r.call.begin).Seconds()
			cm.duration.Observe(sec)
			if sec > 0 {
				cm.busbw.Set(float64(ci.Bytes) * busFactor(c, ci.Ranks) / sec)
			}
			if r.tl != nil {
				r.traceCall(now, err)
			}
		}
	} else if r.call.timed && r.tl != nil {
		r.traceCall(time.Since(r.started), err)
	}
	if err != nil {
		r.countError(err)
	}
}

// countError counts a failed call by kind and blamed rank.
func (r *Recorder) countError(err error) {
	kind, peer := "local", "none"
	var te *transport.Error
	if errors.As(err, &te) {
		kind = strings.ReplaceAll(te.Kind.String(), " ", "_")
		if te.Rank != transport.NoRank {
			peer = strconv.Itoa(te.Rank)
		}
	} else if errors.Is(err, context.Canceled) {
		kind = "canceled"
	} else if errors.Is(err, context.DeadlineExceeded) {
		kind = "timeout"
	}
	r.m.peerErrors.WithLabelValues(kind, peer).Inc()
}

// traceCall writes the call and its phases to the timeline.
func (r *Recorder) traceCall(now time.Duration, err error) {
	t := r.tl
	ci := &r.call.info
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.begin(ci.Desc.Collective.String(), "collective", 'X', tidCollectives)
	b = t.spanSince(b, r.call.begin, now)
	b = append(b, `,"args":{"bytes":`...)
	b = strconv.AppendInt(b, int64(ci.Bytes), 10)
	b = append(b, `,"ranks":`...)
	b = strconv.AppendInt(b, int64(ci.Ranks), 10)
	b = append(b, `,"group":`...)
	b = strconv.AppendUint(b, uint64(ci.Desc.Group), 10)
	b = append(b, `,"call":`...)
	b = strconv.AppendUint(b, ci.Desc.Call, 10)
	b = append(b, `,"algorithm":`...)
	b = appendJSONString(b, ci.Algorithm)
	if err != nil {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, err.Error())
	}
	b = append(b, '}')
	t.end(b)
	// Phases run back to back from the call's start; "wait for peers"
	// (until the first receive completed, its transfer included) nests
	// in the first phase.
	waitEnd := r.call.arrived
	for i := 0; i < r.call.nph; i++ {
		pm := r.call.phases[i]
		from, to := pm.at, now
		if i == 0 {
			from = r.call.begin
		}
		if i+1 < r.call.nph {
			to = r.call.phases[i+1].at
		}
		if i == 0 && waitEnd > to {
			waitEnd = to
		}
		if pm.ph == plan.PhaseNone || to <= from {
			continue
		}
		t.end(t.spanSince(t.begin(pm.ph.String(), "phase", 'X', tidCollectives), from, to))
	}
	if waitEnd > 0 {
		t.end(t.spanSince(t.begin("wait for peers", "phase", 'X', tidCollectives), r.call.begin, waitEnd))
	}
}

// SetLinks records the transport of each link (once the mesh is up).
func (r *Recorder) SetLinks(links []LinkInfo) {
	r.stepMu.Lock()
	r.links = append([]LinkInfo(nil), links...)
	r.stepMu.Unlock()
	r.m.links.Reset()
	for _, l := range links {
		r.m.links.WithLabelValues(strconv.Itoa(l.Peer), strconv.Itoa(l.Channel), l.Transport).Set(1)
	}
	r.publishInfo()
}

// infoMsg describes the rank (kept sticky in the stream).
type infoMsg struct {
	Kind      string     `json:"kind"`
	Rank      int        `json:"rank"`
	World     int        `json:"world"`
	Host      string     `json:"host"`
	PID       int        `json:"pid"`
	Metrics   string     `json:"metrics,omitempty"`
	Timeline  string     `json:"timeline,omitempty"`
	StartedMs float64    `json:"started_ms"`
	Links     []LinkInfo `json:"links"`
}

func (r *Recorder) publishInfo() {
	r.stepMu.Lock()
	msg := infoMsg{Kind: "info", Rank: r.cfg.Rank, World: r.cfg.World, Host: r.cfg.Host, PID: os.Getpid(), Metrics: r.Addr(),
		Timeline: r.cfg.Timeline, StartedMs: unixMs(r.started), Links: r.links}
	r.stepMu.Unlock()
	if b, err := json.Marshal(msg); err == nil {
		r.hub.publish(b, "info")
	}
}

// Handler serves /metrics, /events, /info and /debug/flight, to anyone:
// New puts it behind the endpoint token when it binds beyond loopback.
func (r *Recorder) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promHandler(r.m))
	mux.HandleFunc("/events", func(w http.ResponseWriter, req *http.Request) { serveSSE(w, req, r.hub) })
	mux.HandleFunc("/info", func(w http.ResponseWriter, req *http.Request) {
		r.hub.mu.Lock()
		b := r.hub.sticky["info"]
		r.hub.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	if r.cfg.Flight != nil {
		mux.HandleFunc("/debug/flight", func(w http.ResponseWriter, req *http.Request) {
			last, _ := strconv.Atoi(req.URL.Query().Get("last"))
			w.Header().Set("Content-Type", "application/json")
			if err := r.cfg.Flight(w, last); err != nil {
				r.cfg.Logger.Debug().Err(err).Msg("obs: /debug/flight")
			}
		})
	}
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, req *http.Request) {
		fmt.Fprintf(w, "ringtail rank %d of %d on %s: /metrics (Prometheus), /events (event stream), /info, /debug/flight (the flight recorder's last calls; ?last=N)\n", r.cfg.Rank, r.cfg.World, r.cfg.Host)
	})
	return mux
}

// Close stops the sampler and the server and closes the timeline. Safe to
// call twice.
func (r *Recorder) Close() error {
	r.closeMu.Lock()
	defer r.closeMu.Unlock()
	if r.closed {
		return r.closeErr
	}
	r.closed = true
	close(r.stop)
	<-r.done
	r.hub.close()
	var errs []error
	if r.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := r.srv.Shutdown(ctx); err != nil {
			r.srv.Close()
		}
		cancel()
	}
	if r.tl != nil {
		errs = append(errs, r.tl.closeFile())
	}
	if r.cfg.GPU != nil {
		r.cfg.GPU.Close()
	}
	r.closeErr = errors.Join(errs...)
	return r.closeErr
}

func unixMs(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e6
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

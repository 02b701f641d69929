package obs

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

//go:embed web
var webFS embed.FS

// DashboardConfig configures a Dashboard.
type DashboardConfig struct {
	// Listen is the host:port the page is served on (port 0: a free one).
	// Beyond loopback it needs Secret, and the page then asks for the
	// endpoint token (URL carries it).
	Listen string
	// Secret is the job secret: the dashboard sends its endpoint token
	// (Token) to the ranks, whose endpoints beyond loopback require it,
	// and requires it of browsers when Listen is beyond loopback.
	Secret []byte
	// Targets are the ranks' metrics addresses (host:port), whose /events
	// streams the dashboard follows.
	Targets []string
	// Timeline is a trace file (merged or one rank's) served at
	// /api/timeline for the timeline view (/timeline.html); empty: none.
	Timeline string
	// Title heads the page (default "ringtail").
	Title string
	// History bounds the events kept for browsers (default 20000).
	History int
	// Logger receives connection problems at debug level.
	Logger zerolog.Logger
	// Client fetches the ranks' streams (default: a client without a
	// timeout, as streams are long-lived).
	Client *http.Client
	// OnStragglers, if set, is called with each change of the job's
	// straggler set, as the first target's step events show it (in step
	// order, from one goroutine); the launcher prints it.
	OnStragglers func(StragglerChange)
}

// Validate reports every invalid field.
func (c *DashboardConfig) Validate() error {
	var errs []error
	if err := CheckAddr(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen address: %w", err))
	} else if err := CheckExposure(c.Listen, "dashboard address", c.Secret); err != nil {
		errs = append(errs, err)
	}
	if len(c.Targets) == 0 && c.Timeline == "" {
		errs = append(errs, errors.New("no rank addresses to follow and no timeline to show"))
	}
	for _, t := range c.Targets {
		if err := CheckAddr(t); err != nil {
			errs = append(errs, fmt.Errorf("rank address: %w", err))
		}
	}
	if c.History < 0 {
		errs = append(errs, fmt.Errorf("history %d must not be negative", c.History))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("obs: invalid dashboard config: %w", err)
	}
	return nil
}

// Dashboard serves the live page: it follows every rank's event stream,
// keeps what they said (bounded), and streams it to browsers, who draw
// it (web/app.js). It keeps serving what it has after the ranks are gone.
type Dashboard struct {
	cfg    DashboardConfig
	token  string // the endpoint token ("" without a secret)
	gated  bool   // the page needs the token (Listen beyond loopback)
	hub    *hub
	ln     net.Listener
	srv    *http.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// NewDashboard validates cfg, listens and starts following the ranks.
func NewDashboard(cfg DashboardConfig) (*Dashboard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Title == "" {
		cfg.Title = "ringtail"
	}
	if cfg.History == 0 {
		cfg.History = 20000
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("obs: dashboard: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dashboard{cfg: cfg, token: Token(cfg.Secret), gated: !IsLoopback(cfg.Listen), hub: newHub(cfg.History), ln: ln, cancel: cancel}
	b, _ := json.Marshal(struct {
		Kind    string   `json:"kind"`
		Title   string   `json:"title"`
		Targets []string `json:"targets"`
	}{"job", cfg.Title, cfg.Targets})
	d.hub.publish(b, "job")
	h := d.Handler()
	if d.gated {
		h = requireToken(d.token, true, h)
	}
	d.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go d.srv.Serve(ln)
	for i, t := range cfg.Targets {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.follow(ctx, i, t)
		}()
	}
	if len(cfg.Targets) > 0 {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.followFlight(ctx)
		}()
	}
	return d, nil
}

// Addr returns the address the page is served on.
func (d *Dashboard) Addr() string { return d.ln.Addr().String() }

// URL returns the page's URL; when the page needs the endpoint token
// (Listen beyond loopback) the URL carries it, and opening it once sets a
// cookie that holds it.
func (d *Dashboard) URL() string {
	if d.gated {
		return "http://" + d.Addr() + "/?token=" + d.token
	}
	return "http://" + d.Addr() + "/"
}

// Handler serves the page, its assets and /api/events, to anyone:
// NewDashboard puts it behind the endpoint token when it listens beyond
// loopback.
func (d *Dashboard) Handler() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(webFS, "web")
	mux.Handle("/", http.FileServerFS(sub))
	mux.HandleFunc("/api/events", func(w http.ResponseWriter, r *http.Request) { serveSSE(w, r, d.hub) })
	mux.HandleFunc("/api/timeline", func(w http.ResponseWriter, r *http.Request) {
		if d.cfg.Timeline == "" {
			http.Error(w, "no timeline (ringtail dashboard --timeline FILE)", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		http.ServeFile(w, r, d.cfg.Timeline)
	})
	return mux
}

// targetMsg reports a rank stream's state.
type targetMsg struct {
	Kind   string `json:"kind"`
	Index  int    `json:"index"`
	Target string `json:"target"`
	State  string `json:"state"` // "connecting", "connected", "lost: ..."
}

// follow reads one rank's stream until ctx ends, reconnecting (the rank
// may not be up yet, or may restart) and skipping what the rank replays of
// what was already relayed.
func (d *Dashboard) follow(ctx context.Context, index int, target string) {
	status := func(state string) {
		b, _ := json.Marshal(targetMsg{"target", index, target, state})
		d.hub.publish(b, fmt.Sprintf("target/%d", index))
	}
	lastStep, lastStats, lastProgress := -1<<62, 0.0, 0.0
	var watch *stragglerWatch
	if index == 0 && d.cfg.OnStragglers != nil {
		watch = &stragglerWatch{}
	}
	backoff := 200 * time.Millisecond
	status("connecting")
	for ctx.Err() == nil {
		err := d.stream(ctx, target, func(msg []byte) {
			var head struct {
				Kind string  `json:"kind"`
				Step int     `json:"step"`
				TMs  float64 `json:"t_ms"`
			}
			if json.Unmarshal(msg, &head) != nil {
				return
			}
			switch head.Kind {
			case "info":
				d.hub.publish(msg, fmt.Sprintf("info/%d", index))
			case "step":
				if head.Step > lastStep {
					lastStep = head.Step
					d.hub.publish(msg, "")
					var m stepMsg
					if watch != nil && json.Unmarshal(msg, &m) == nil {
						if c, ok := watch.observe(&m); ok {
							d.cfg.OnStragglers(c)
						}
					}
				}
			case "progress":
				if head.TMs > lastProgress {
					lastProgress = head.TMs
					d.hub.publish(msg, "")
				}
			case "stats":
				if head.TMs > lastStats {
					lastStats = head.TMs
					d.hub.publish(msg, "")
				}
			}
		}, func() {
			status("connected")
			backoff = 200 * time.Millisecond
		})
		if ctx.Err() != nil {
			return
		}
		status("lost: " + err.Error())
		d.cfg.Logger.Debug().Err(err).Str("rank_addr", target).Msg("obs: dashboard: rank stream")
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// stream reads one connection of target's /events, calling onMsg for each
// message; it returns why the stream ended.
func (d *Dashboard) stream(ctx context.Context, target string, onMsg func([]byte), onConnect func()) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+target+"/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	authorize(req, d.token)
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("%s: %s: the rank wants the job's endpoint token (give the dashboard the job secret: RINGTAIL_SECRET or RINGTAIL_SECRET_FILE)", target, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", target, resp.Status)
	}
	onConnect()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			onMsg(bytes.Clone(data))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("stream ended")
}

// Close stops following the ranks and serving. Safe to call twice.
func (d *Dashboard) Close() error {
	d.once.Do(func() {
		d.cancel()
		d.hub.close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := d.srv.Shutdown(ctx); err != nil {
			d.srv.Close()
		}
		cancel()
		d.wg.Wait()
	})
	return nil
}

// ExpandTargets expands rank addresses: "host:9400-9403" is four
// addresses; commas separate entries.
func ExpandTargets(list string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		host, port, err := net.SplitHostPort(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not host:port or host:first-last: %w", f, err)
		}
		var lo, hi int
		if a, b, ok := strings.Cut(port, "-"); ok {
			if _, err := fmt.Sscanf(a+" "+b, "%d %d", &lo, &hi); err != nil || lo < 1 || hi > 65535 || hi < lo || hi-lo > 4096 {
				return nil, fmt.Errorf("%q: bad port range", f)
			}
		} else if _, err := fmt.Sscanf(port, "%d", &lo); err != nil || lo < 1 || lo > 65535 {
			return nil, fmt.Errorf("%q: bad port", f)
		} else {
			hi = lo
		}
		for p := lo; p <= hi; p++ {
			out = append(out, net.JoinHostPort(host, fmt.Sprint(p)))
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no rank addresses")
	}
	return out, nil
}

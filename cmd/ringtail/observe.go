package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ringtail-ml/ringtail/internal/cli"
	"github.com/ringtail-ml/ringtail/internal/launch"
	"github.com/ringtail-ml/ringtail/internal/obs"
)

// runObservability is what `ringtail run` does for --metrics-port,
// --timeline and --dashboard.
type runObservability struct {
	metricsPort int
	timeline    string // absolute; the ranks write timeline.rank<r>.ext
	merged      string // where the merged trace goes
	dash        *obs.Dashboard
	stderr      io.Writer
}

// startObservability validates the flags, picks the metrics ports and
// starts the dashboard; it prints where to look.
// secret is the job's: the dashboard sends its endpoint token to the
// ranks (remote ones serve beyond loopback and require it).
func startObservability(dashboard string, metricsPort int, timeline string, np int, hosts []launch.HostSlots, secret []byte, stderr io.Writer) (*runObservability, error) {
	o := &runObservability{metricsPort: metricsPort, stderr: stderr}
	if metricsPort < 0 || metricsPort > 65535 {
		return nil, fmt.Errorf("--metrics-port %d must be in 1..65535", metricsPort)
	}
	if timeline != "" {
		abs, err := filepath.Abs(timeline)
		if err != nil {
			return nil, fmt.Errorf("--timeline: %w", err)
		}
		if fi, err := os.Stat(filepath.Dir(abs)); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--timeline %s: its directory does not exist", timeline)
		}
		o.timeline, o.merged = abs, abs
	}
	if metricsPort > 0 {
		if err := launch.CheckMetricsPorts(np, hosts, metricsPort); err != nil {
			return nil, err
		}
	}
	if dashboard == "" {
		if metricsPort > 0 {
			fmt.Fprintf(stderr, "ringtail run: metrics at http://127.0.0.1:%d/metrics (rank 0; each rank on the port + its local rank)\n", metricsPort)
		}
		return o, nil
	}
	if err := obs.CheckAddr(dashboard); err != nil {
		return nil, fmt.Errorf("--dashboard: %w", err)
	}
	if np < 1 {
		return nil, errors.New("--dashboard needs -np")
	}
	if o.metricsPort == 0 {
		base, err := launch.FreePortRange(np)
		if err != nil {
			return nil, err
		}
		o.metricsPort = base
	}
	// The dashboard logs lost rank streams at debug level to the logger
	// it is given: none yet. The job-wide logger (RINGTAIL_LOG_LEVEL,
	// issue 14 item 4) plugs in here, as DashboardConfig.Logger.
	d, err := obs.NewDashboard(obs.DashboardConfig{Listen: dashboard, Secret: secret, Targets: launch.MetricsAddrs(np, hosts, o.metricsPort),
		Title: fmt.Sprintf("ringtail run -np %d", np),
		// One line when the straggler set changes: the terminal says who
		// straggles and what share it gets, not only the page.
		OnStragglers: func(c obs.StragglerChange) { fmt.Fprintf(stderr, "ringtail run: %s\n", c) }})
	if err != nil {
		return nil, fmt.Errorf("--dashboard: %w", err)
	}
	o.dash = d
	fmt.Fprintf(stderr, "ringtail run: dashboard at %s (metrics at http://127.0.0.1:%d/metrics for rank 0, +1 per local rank)\n", d.URL(), o.metricsPort)
	return o, nil
}

// finish merges the ranks' timelines (those on this host) and says where
// the trace is.
func (o *runObservability) finish(np int) {
	if o.timeline == "" {
		return
	}
	var files, missing []string
	for r := 0; r < np; r++ {
		f := obs.RankTimelinePath(o.timeline, r, np)
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		} else {
			missing = append(missing, fmt.Sprint(r))
		}
	}
	if np == 1 {
		if len(files) == 1 {
			fmt.Fprintf(o.stderr, "ringtail run: timeline in %s (open it in https://ui.perfetto.dev or chrome://tracing)\n", files[0])
		}
		return
	}
	if len(missing) > 0 {
		fmt.Fprintf(o.stderr, "ringtail run: no timeline from rank(s) %s on this host (remote ranks keep theirs; merge with ringtail timeline merge)\n", strings.Join(missing, ","))
	}
	if len(files) == 0 {
		return
	}
	if _, err := mergeTimelines(o.merged, files); err != nil {
		fmt.Fprintf(o.stderr, "ringtail run: merging timelines: %v\n", err)
		return
	}
	fmt.Fprintf(o.stderr, "ringtail run: timeline of %d ranks in %s (open it in https://ui.perfetto.dev or chrome://tracing)\n", len(files), o.merged)
}

func (o *runObservability) close() {
	if o.dash != nil {
		o.dash.Close()
	}
}

// mergeTimelines writes the merged trace of files (and torch traces) to out (through a
// temporary file, so a failure leaves no half trace). The trace is 0600
// (os.CreateTemp's mode), as the ranks' own timelines are: it names the
// hosts and every collective of the job, and its owner can still open it.
func mergeTimelines(out string, files []string, torch ...obs.TorchTrace) (obs.MergeReport, error) {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".timeline-*.json")
	if err != nil {
		return obs.MergeReport{}, err
	}
	defer os.Remove(tmp.Name())
	rep, err := obs.Merge(tmp, files, torch...)
	if err != nil {
		tmp.Close()
		return rep, err
	}
	if err := tmp.Close(); err != nil {
		return rep, err
	}
	return rep, os.Rename(tmp.Name(), out)
}

const dashboardUsage = `Usage: ringtail dashboard --ranks ADDRS [--listen ADDR] [--timeline FILE]

Serves the live dashboard of a running job whose ranks serve metrics
(ringtail run --metrics-port P, or RINGTAIL_METRICS_ADDR): arrival heatmap
per rank × step, mode and evicted ranks, shares, predicted vs actual
arrivals, busbw over time, each rank's host, transports and GPU.
ADDRS lists the ranks' metrics addresses: host:port entries separated by
commas, host:first-last for a range (e.g. 127.0.0.1:9400-9403).
--timeline FILE also serves a trace file's view at /timeline.html (ranks
are then optional).
The job secret (RINGTAIL_SECRET, RINGTAIL_SECRET_FILE or --secret-file)
gives the endpoint token that ranks serving beyond loopback require; a
--listen address beyond loopback needs it too, and the page then asks
browsers for the token (the printed URL carries it).
`

// runDashboard is `ringtail dashboard`.
func runDashboard(args []string, stdout, stderr io.Writer) int {
	cmd := cli.New("ringtail dashboard", dashboardUsage)
	fs := cmd.Flags
	listen := fs.String("listen", "127.0.0.1:8080", "serve the page on `host:port`")
	ranks := fs.String("ranks", "", "the ranks' metrics `addresses` (host:port,... or host:first-last)")
	timeline := fs.String("timeline", "", "also show this trace `file` (ringtail run --timeline's, or timeline merge's) at /timeline.html")
	title := fs.String("title", "ringtail", "the page's title")
	secretFile := fs.String("secret-file", "", "read the job secret from `file` (default: $RINGTAIL_SECRET, $RINGTAIL_SECRET_FILE)")
	if code, ok := cmd.Parse(args, stdout, stderr); !ok {
		return code
	}
	var targets []string
	if *ranks != "" || *timeline == "" {
		t, err := obs.ExpandTargets(*ranks)
		if err != nil {
			fmt.Fprintf(stderr, "ringtail dashboard: --ranks: %v\n", err)
			return 2
		}
		targets = t
	}
	if *timeline != "" {
		if _, err := os.Stat(*timeline); err != nil {
			fmt.Fprintf(stderr, "ringtail dashboard: --timeline: %v\n", err)
			return 2
		}
	}
	secret, err := jobSecret(*secretFile)
	if err != nil {
		fmt.Fprintf(stderr, "ringtail dashboard: %v\n", err)
		return 2
	}
	d, err := obs.NewDashboard(obs.DashboardConfig{Listen: *listen, Secret: secret, Targets: targets, Title: *title, Timeline: *timeline})
	if err != nil {
		fmt.Fprintf(stderr, "ringtail dashboard: %v\n", err)
		return 2
	}
	defer d.Close()
	fmt.Fprintf(stderr, "ringtail dashboard: %s following %d ranks (Ctrl-C to stop)\n", d.URL(), len(targets))
	if *timeline != "" {
		fmt.Fprintf(stderr, "ringtail dashboard: timeline of %s at %stimeline.html\n", *timeline, d.URL())
	}
	ctx, stop := interruptContext()
	<-ctx.Done()
	stop()
	return 0
}

const timelineUsage = `Usage: ringtail timeline merge -o OUT [--torch RANK=TRACE]... FILE...

Merges the ranks' timeline files (RINGTAIL_TIMELINE, one per rank) into
one Chrome-trace / Perfetto file, with the ranks' clocks aligned on the
calls they share. Open OUT in https://ui.perfetto.dev or chrome://tracing.

--torch RANK=TRACE lays a torch.profiler trace of that rank
(prof.export_chrome_trace) on its timeline: the offset is measured from
the backend's communication events in the trace (ringtail:all_reduce,
broadcast, all_gather, barrier) against the calls the timeline records,
and the trace's events join the rank's process on threads of their own.
`

// runTimeline is `ringtail timeline merge`.
func runTimeline(args []string, stdout, stderr io.Writer) int {
	cmd := cli.New("ringtail timeline merge", timelineUsage)
	fs := cmd.Flags
	out := fs.String("o", "", "write the merged trace to `file` (required)")
	var torchFlags listFlag
	fs.Var(&torchFlags, "torch", "lay rank `RANK=TRACE`'s torch.profiler trace on its timeline (repeatable)")
	if len(args) == 0 || args[0] != "merge" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			cmd.Help(stdout)
			return 0
		}
		fmt.Fprintln(stderr, "ringtail timeline: want 'merge' (run 'ringtail timeline --help')")
		return 2
	}
	if code, ok := cmd.ParseArgs(args[1:], stdout, stderr); !ok {
		return code
	}
	if *out == "" || fs.NArg() == 0 {
		return cmd.Fail(stderr, "give -o OUT and at least one rank file")
	}
	var torch []obs.TorchTrace
	for _, spec := range torchFlags {
		rank, path, ok := strings.Cut(spec, "=")
		r, err := strconv.Atoi(rank)
		if !ok || err != nil || r < 0 || path == "" {
			return cmd.Fail(stderr, "--torch %q: want RANK=TRACE (e.g. 0=trace.json)", spec)
		}
		torch = append(torch, obs.TorchTrace{Rank: r, Path: path})
	}
	rep, err := mergeTimelines(*out, fs.Args(), torch...)
	if err != nil {
		fmt.Fprintf(stderr, "ringtail timeline merge: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "ringtail timeline merge: %d ranks in %s\n", fs.NArg(), *out)
	for _, tr := range torch {
		al := rep.Torch[strconv.Itoa(tr.Rank)]
		fmt.Fprintf(stdout, "ringtail timeline merge: rank %d's torch trace laid on its timeline at %+.3f µs (%d of its %d communication events met their calls)\n",
			tr.Rank, al.OffsetUs, al.Matched, al.Anchors)
	}
	return 0
}

package assemble

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/envcfg"
	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/obs"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/nvml"
	"github.com/ringtail-ml/ringtail/topology"
)

// PlanFacts are the facts the ranks of a communicator configured as c
// would agree on, for --dump-plan: hosts of LocalWorldSize ranks each
// (block placement), fastboxes where that is one host with shared
// memory, and bandwidth (nil: none) as the links' measurements.
func PlanFacts(c *envcfg.Comm, bandwidth topology.Matrix) algo.Facts {
	f := algo.Facts{World: c.WorldSize, FastboxBytes: transport.FastboxPayload}
	per := max(1, c.LocalWorldSize)
	if per < c.WorldSize {
		f.Host = make([]int, c.WorldSize)
		for r := range f.Host {
			f.Host[r] = r / per
		}
	} else {
		f.Fast = !c.DisableShm && !c.DisableUnix
	}
	if bandwidth != nil {
		f.Net.Bandwidth, f.Measured = bandwidth, true
	}
	return f
}

// Settings maps a validated configuration to the engine's: the
// configuration itself, its control plane resolved (ResolvedControlPlane).
func Settings(c *envcfg.Comm) engine.Settings {
	s := engine.Settings{Comm: *c}
	s.ControlPlane = c.ResolvedControlPlane()
	return s
}

// FlightRecorder returns the rank's flight recorder (nil when off).
func FlightRecorder(c *envcfg.Comm) (*flight.Recorder, error) {
	if c.FlightSize < 0 {
		return nil, nil
	}
	dir := c.FlightDir
	if dir == "" && c.Timeline != "" {
		dir = filepath.Dir(c.Timeline)
	}
	r, err := flight.New(flight.Config{Rank: c.Rank, World: c.WorldSize, JobID: c.JobID, Generation: c.Generation,
		Size: c.FlightSize, Dir: dir, Names: engine.Names(), Logger: c.Logger})
	if err != nil {
		return nil, fmt.Errorf("ringtail: %w", err)
	}
	return r, nil
}

// Recorder starts the rank's observability when MetricsAddr or Timeline
// is set (nil otherwise: nothing is recorded and the calls' path makes
// one nil check); its server shows fl (the flight recorder; nil: off) at
// /debug/flight.
func Recorder(c *envcfg.Comm, fl *flight.Recorder) (*obs.Recorder, error) {
	if c.MetricsAddr == "" && c.Timeline == "" {
		return nil, nil
	}
	addr := ""
	if c.MetricsAddr != "" {
		a, err := obs.RankMetricsAddr(c.MetricsAddr, c.LocalRank)
		if err != nil {
			return nil, fmt.Errorf("ringtail: %w", err)
		}
		addr = a
	}
	timeline := ""
	if c.Timeline != "" {
		timeline = obs.RankTimelinePath(c.Timeline, c.Rank, c.WorldSize)
	}
	gpu, err := nvml.Open(nvml.Config{})
	if err != nil {
		gpu = nil
	}
	// The recorder logs through the communicator's logger: the job-wide
	// logger honouring RINGTAIL_LOG_LEVEL arrives as Config.Logger.
	ocfg := obs.Config{Rank: c.Rank, World: c.WorldSize, MetricsAddr: addr, Secret: c.Secret, Timeline: timeline, GPU: gpu, Logger: c.Logger}
	if fl != nil {
		ocfg.Flight = fl.WriteLive
	}
	rec, err := obs.New(ocfg)
	if err != nil {
		if gpu != nil {
			gpu.Close()
		}
		return nil, fmt.Errorf("ringtail: rank %d: %w", c.Rank, err)
	}
	ev := c.Logger.Info().Int("rank", c.Rank)
	if a := rec.Addr(); a != "" {
		ev = ev.Str("metrics", "http://"+a+"/metrics")
	}
	if timeline != "" {
		ev = ev.Str("timeline", timeline)
	}
	ev.Msg("ringtail: observability on")
	return rec, nil
}

// Open starts a communicator's engine (ringtail.New) over network (nil:
// the transports c chooses; tests pass one): a zero Logger becomes
// envcfg.DefaultLogger (c keeps it), the process's debugging variables
// fill the fields c leaves unset (WithProcessDebug; c keeps them), then
// it validates c and starts the flight recorder, the observability
// recorder (nil when off; told each link's transport) and the engine,
// which joins the job.
func Open(ctx context.Context, c *envcfg.Comm, network transport.Network) (*engine.Engine, *obs.Recorder, error) {
	c.WithDefaultLogger()
	if err := c.WithProcessDebug(); err != nil {
		return nil, nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	fl, err := FlightRecorder(c)
	if err != nil {
		return nil, nil, err
	}
	rec, err := Recorder(c, fl)
	if err != nil {
		return nil, nil, err
	}
	s := Settings(c)
	if rec != nil {
		s.Tracer, s.TracePhases = rec, rec.TracesPhases()
	}
	s.Flight, s.Network = fl, network
	e, err := engine.New(ctx, s)
	if err != nil {
		if rec != nil {
			rec.Close()
		}
		return nil, nil, err
	}
	if rec != nil {
		var links []obs.LinkInfo
		for _, l := range e.Links() {
			links = append(links, obs.LinkInfo{Peer: l.Peer, Channel: l.Channel, Transport: l.Transport, Fallback: l.Fallback})
			c.Logger.Debug().Int("rank", c.Rank).Int("peer", l.Peer).Int("channel", l.Channel).Str("transport", l.Transport).Msg("ringtail: link")
		}
		rec.SetLinks(links)
	}
	return e, rec, nil
}

// Program returns, as text, the program rank c.Rank would run for cl
// (--dump-plan: ringtail.DumpPlan and DumpTree) among ranks placed as
// PlanFacts places them, bandwidth (nil: none) measured; c must be valid.
func Program(c *envcfg.Comm, cl *engine.Call, bandwidth topology.Matrix) (string, error) {
	if err := c.Validate(); err != nil {
		return "", err
	}
	p, err := engine.Program(cl, c.Rank, Settings(c), PlanFacts(c, bandwidth))
	if err != nil {
		return "", err
	}
	return p.String(), nil
}

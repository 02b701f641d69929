package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/p2p"
	"github.com/ringtail-ml/ringtail/internal/rendezvous"
)

// Job is what a coordinator needs to know of the job it serves.
type Job struct {
	ID     string
	Secret []byte
	World  int
}

// CoordinatorFunc serves the rendezvous of job on ln until ctx ends and
// then returns nil; an earlier return is a failure of the job. It owns ln.
type CoordinatorFunc func(ctx context.Context, ln net.Listener, job Job) error

// ServeRendezvous returns the CoordinatorFunc that runs an
// internal/rendezvous server, logging to log.
func ServeRendezvous(log zerolog.Logger) CoordinatorFunc {
	return func(ctx context.Context, ln net.Listener, job Job) error {
		srv, err := rendezvous.NewServer(rendezvous.ServerConfig{JobID: job.ID, Secret: job.Secret, World: job.World, Logger: log})
		if err != nil {
			ln.Close()
			return fmt.Errorf("launch: coordinator: %w", err)
		}
		return srv.Serve(ctx, ln)
	}
}

// DerivedJobID is the job id a rank uses when RINGTAIL_JOB_ID is unset:
// "job@" and MASTER_ADDR:MASTER_PORT exactly as the rank sees them.
func DerivedJobID(masterAddr string, masterPort int) string {
	return "job@" + net.JoinHostPort(masterAddr, strconv.Itoa(masterPort))
}

// CoordinatorConfig configures ServeCoordinator, the rendezvous on its own
// for jobs started by other launchers (torchrun, Slurm).
type CoordinatorConfig struct {
	// Listen is the TCP address to listen on, host:port.
	Listen string
	// ControlPlane is "libp2p" (the default, also "": the ranks' default
	// when they have the secret) or "tcp" (ranks then need
	// RINGTAIL_CONTROL_PLANE=tcp).
	ControlPlane string
	// World is the number of ranks of the job.
	World int
	// Secret is the job secret the ranks share.
	Secret []byte
	// JobID is the ranks' RINGTAIL_JOB_ID. Empty: DerivedJobID of the
	// listening address, which matches ranks that leave RINGTAIL_JOB_ID
	// unset and set MASTER_ADDR to exactly Listen's host; it needs Listen
	// to name a host (not ":port" or 0.0.0.0).
	JobID string
	// Logger receives the coordinator's logs.
	Logger zerolog.Logger
	// Ready, if set, is called with the bound address and the job id once
	// the coordinator listens.
	Ready func(addr net.Addr, jobID string)
}

// Validate reports every invalid field.
func (c *CoordinatorConfig) Validate() error {
	var errs []error
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		errs = append(errs, fmt.Errorf("listen address %q: %w", c.Listen, err))
	} else if p, perr := strconv.Atoi(port); perr != nil || p < 0 || p > 65535 {
		errs = append(errs, fmt.Errorf("listen address %q: port %q must be in 0..65535", c.Listen, port))
	} else if ip := net.ParseIP(host); c.JobID == "" && (host == "" || ip != nil && ip.IsUnspecified()) {
		errs = append(errs, fmt.Errorf("listen address %q names no host to derive the job id from: give a job id (and set %s on the ranks)", c.Listen, EnvJobID))
	}
	if c.World < 1 || c.World > MaxRanks {
		errs = append(errs, fmt.Errorf("world size %d must be in 1..%d", c.World, MaxRanks))
	}
	if err := checkSecret(c.Secret); err != nil {
		errs = append(errs, err)
	}
	if len(c.JobID) > 128 {
		errs = append(errs, errors.New("job id must be at most 128 bytes"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("launch: invalid coordinator config: %w", err)
	}
	return nil
}

// ServeCoordinator listens on cfg.Listen and serves the rendezvous until
// ctx ends (then it returns nil) or serving fails.
func ServeCoordinator(ctx context.Context, cfg CoordinatorConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	jobID := cfg.JobID
	plane := controlPlane(cfg.ControlPlane)
	host, portStr, _ := net.SplitHostPort(cfg.Listen)
	if jobID == "" && plane == "libp2p" {
		// The libp2p identity derives from the job id, and the job id
		// from the port: an ephemeral port is chosen before listening.
		p, _ := strconv.Atoi(portStr)
		if p == 0 {
			var err error
			if p, err = freePort(ctx, host); err != nil {
				return fmt.Errorf("launch: coordinator: %w", err)
			}
			cfg.Listen = net.JoinHostPort(host, strconv.Itoa(p))
		}
		jobID = DerivedJobID(host, p)
	}
	ln, port, err := listenCoordinator(ctx, plane, cfg.Listen, jobID, cfg.Secret, cfg.Logger)
	if err != nil {
		return fmt.Errorf("launch: coordinator: %w", err)
	}
	if jobID == "" {
		jobID = DerivedJobID(host, port)
	}
	cfg.Logger.Info().Str("addr", ln.Addr().String()).Str("job", jobID).Int("world", cfg.World).Msg("coordinator: serving")
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr(), jobID)
	}
	err = ServeRendezvous(cfg.Logger)(ctx, ln, Job{ID: jobID, Secret: cfg.Secret, World: cfg.World})
	cfg.Logger.Info().Err(err).Msg("coordinator: stopped")
	return err
}

// freePort returns a TCP port on host that was free a moment ago (another
// process may take it before the caller listens; listening then fails).
func freePort(ctx context.Context, host string) (int, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

// controlPlane resolves a configured control plane: a launcher or a
// coordinator always holds the job secret, so the default is libp2p, as
// it is for ranks that have the secret.
func controlPlane(configured string) string {
	if configured == "" {
		return "libp2p"
	}
	return configured
}

// listenCoordinator opens the rendezvous listener on bind (host:port): a
// TCP listener, or for the libp2p control plane a libp2p host whose
// identity is derived from the job secret, whose admission gate logs the
// connections it refuses to log (rate-limited, at warn). It returns the
// bound port.
func listenCoordinator(ctx context.Context, plane, bind, jobID string, secret []byte, log zerolog.Logger) (net.Listener, int, error) {
	if plane != "libp2p" {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", bind)
		if err != nil {
			return nil, 0, err
		}
		return ln, ln.Addr().(*net.TCPAddr).Port, nil
	}
	host, portStr, err := net.SplitHostPort(bind)
	if err != nil {
		return nil, 0, err
	}
	port, _ := strconv.Atoi(portStr)
	if host == "" {
		host = "0.0.0.0"
	}
	ln, err := p2p.ListenCoordinator(p2p.CoordinatorConfig{JobID: jobID, Secret: secret, ListenIP: host, Port: port, Logger: log})
	if err != nil {
		return nil, 0, err
	}
	a, ok := ln.Addr().(p2p.Addr)
	if !ok {
		ln.Close()
		return nil, 0, fmt.Errorf("libp2p listener address %v", ln.Addr())
	}
	v, err := a.Multiaddr.ValueForProtocol(ma.P_TCP)
	if err != nil {
		ln.Close()
		return nil, 0, err
	}
	port, err = strconv.Atoi(v)
	return ln, port, err
}

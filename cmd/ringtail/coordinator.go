package main

import (
	ma "github.com/multiformats/go-multiaddr"

	"context"
	"fmt"
	"github.com/ringtail-ml/ringtail/internal/cli"
	"github.com/ringtail-ml/ringtail/internal/p2p"
	"io"
	"net"
	"os"
	"strings"

	"github.com/ringtail-ml/ringtail/internal/launch"
	"github.com/ringtail-ml/ringtail/internal/logging"
)

const coordinatorUsage = `Usage: ringtail coordinator --listen ADDR -np N [--secret-file F] [--job-id ID]

Serves the rendezvous of one job on its own, for ranks started by another
launcher (torchrun, Slurm): set MASTER_ADDR and MASTER_PORT to this
address, RINGTAIL_COORDINATOR=external, and the same secret and job id on
every rank. Runs until SIGINT or SIGTERM; logs to stderr.

The secret comes from --secret-file, else $RINGTAIL_SECRET, else the file
$RINGTAIL_SECRET_FILE. The job id comes from --job-id, else
$RINGTAIL_JOB_ID, else is derived from --listen as the ranks derive it
from MASTER_ADDR:MASTER_PORT when they have no RINGTAIL_JOB_ID (this
needs --listen to name the host exactly as MASTER_ADDR does).
`

// runCoordinator is `ringtail coordinator`.
func runCoordinator(args []string, stdout, stderr io.Writer) int {
	ctx, stop := interruptContext()
	defer stop()
	return coordinatorMain(ctx, args, stdout, stderr)
}

// coordinatorMain parses the flags of `ringtail coordinator` and serves
// until ctx ends.
func coordinatorMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := cli.New("ringtail coordinator", coordinatorUsage)
	fs := cmd.Flags
	var (
		listen     = fs.String("listen", "", "`host:port` to listen on (port 0: a free one, logged)")
		control    = fs.String("control-plane", "libp2p", "libp2p (the ranks' default) or tcp (ranks then need RINGTAIL_CONTROL_PLANE=tcp)")
		np         = fs.Int("np", 0, "number of ranks in the job")
		secretFile = fs.String("secret-file", "", "read the job secret from `file`")
		jobID      = fs.String("job-id", "", "the ranks' RINGTAIL_JOB_ID")
	)
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ringtail coordinator: "+format+"\n", a...)
		return 2
	}
	if code, ok := cmd.Parse(args, stdout, stderr); !ok {
		return code
	}
	if *listen == "" {
		return usageErr("--listen is required (host:port)")
	}
	if *np < 1 {
		if cmd.Given()["np"] {
			return usageErr("-np %d: a job needs at least one rank, e.g. -np 4", *np)
		}
		return usageErr("-np is required: the number of ranks, e.g. -np 4")
	}

	secret, err := jobSecret(*secretFile)
	if err != nil {
		return usageErr("%v", err)
	}
	if secret == nil {
		return usageErr("no job secret: give --secret-file or set %s", launch.EnvSecret)
	}
	if *jobID == "" {
		*jobID = os.Getenv(launch.EnvJobID)
	}

	logger, err := logging.FromEnv(stderr)
	if err != nil {
		return usageErr("%v", err)
	}
	cfg := launch.CoordinatorConfig{
		Listen: *listen, ControlPlane: *control, World: *np, Secret: secret, JobID: *jobID, Logger: logger,
		Ready: func(addr net.Addr, id string) {
			// Where to point the ranks: the command's output, whatever the
			// log level.
			fmt.Fprintf(stderr, "ringtail coordinator: serving job %q for %d ranks on %s\n", id, *np, hostPort(addr))
		},
	}
	if err := cfg.Validate(); err != nil {
		return usageErr("%s", strings.ReplaceAll(strings.TrimPrefix(err.Error(), "launch: "), "\n", "; "))
	}
	if err := launch.ServeCoordinator(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "ringtail coordinator: %v\n", err)
		return 1
	}
	return 0
}

// hostPort renders a coordinator address as host:port (what ranks put in
// MASTER_ADDR and MASTER_PORT), with the libp2p peer id when there is one.
func hostPort(addr net.Addr) string {
	a, ok := addr.(p2p.Addr)
	if !ok {
		return addr.String()
	}
	ip, err := a.Multiaddr.ValueForProtocol(ma.P_IP4)
	if err != nil {
		ip, _ = a.Multiaddr.ValueForProtocol(ma.P_IP6)
	}
	port, _ := a.Multiaddr.ValueForProtocol(ma.P_TCP)
	return net.JoinHostPort(ip, port) + " (libp2p peer " + a.Peer.String() + ")"
}

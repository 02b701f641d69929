package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/integration/faults/event"
	"github.com/ringtail-ml/ringtail/internal/logging"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.role, "role", "rank", "rank, shard-service or shard-client")
	fs.IntVar(&o.steps, "steps", 20, "collectives to run")
	fs.IntVar(&o.elems, "elems", 1<<16, "float32 elements per collective")
	fs.StringVar(&o.op, "op", "mixed", "allreduce, broadcast, allgather, reducescatter or mixed (one of each in turn)")
	fs.StringVar(&o.fault, "fault", "none", "none, skip, root, dtype, count or op: what -target does at step -at")
	fs.IntVar(&o.target, "target", -1, "the misbehaving rank")
	fs.IntVar(&o.at, "at", -1, "the step it misbehaves at")
	fs.DurationVar(&o.pace, "pace", 0, "pause before each step")
	fs.StringVar(&o.waitFile, "wait-file", "", "wait for this file to exist before joining the job")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:0", "shard roles: the service's address")
	fs.StringVar(&o.dir, "dir", "", "shard-service: the store's directory")
	fs.IntVar(&o.shards, "shards", 200, "shard-service: shards in the job")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log, err := logging.FromEnv(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 2
	}
	out := event.NewWriter(stdout)
	if o.role == "rank" {
		// A rank does not stop on SIGTERM (see event.Terminated): the
		// harness wants each rank's own account of the fault.
		term := make(chan os.Signal, 1)
		signal.Notify(term, os.Interrupt, syscall.SIGTERM)
		go func() {
			<-term
			out.Emit(event.Event{Ev: event.Terminated, Rank: rankFromEnv()})
		}()
		return runRank(context.Background(), o, out, log)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch o.role {
	case "shard-service":
		return runShardService(ctx, o, out, log)
	case "shard-client":
		return runShardClient(ctx, o, out)
	}
	fmt.Fprintf(stderr, "worker: unknown role %q\n", o.role)
	return 2
}

// rankFromEnv returns RANK (-1 if unset or malformed).
func rankFromEnv() int {
	r, err := strconv.Atoi(os.Getenv("RANK"))
	if err != nil {
		return -1
	}
	return r
}

type options struct {
	role, op, fault, waitFile, addr, dir string
	steps, elems, target, at, shards     int
	pace                                 time.Duration
}

// Exit statuses of a rank.
const (
	exitFailed = 1 // a collective returned an error
	exitWrong  = 3 // a collective returned success with a wrong result
	exitSetup  = 4 // could not join the job
)

func waitFor(ctx context.Context, path string) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func runRank(ctx context.Context, o options, out *event.Writer, log logger) int {
	cfg, err := ringtail.ConfigFromEnv()
	if err != nil {
		out.Emit(event.Event{Ev: event.Setup, Err: err.Error()})
		return exitSetup
	}
	cfg.Logger = log.With().Int("rank", cfg.Rank).Logger()
	out.Emit(event.Event{Ev: event.Started, Rank: cfg.Rank, PID: os.Getpid()})
	if o.waitFile != "" {
		if err := waitFor(ctx, o.waitFile); err != nil {
			out.Emit(event.Event{Ev: event.Setup, Rank: cfg.Rank, Err: err.Error()})
			return exitSetup
		}
	}
	comm, err := ringtail.New(ctx, cfg)
	if err != nil {
		out.Emit(event.Event{Ev: event.Setup, Rank: cfg.Rank, Err: err.Error()})
		return exitSetup
	}
	defer comm.Close()
	out.Emit(event.Event{Ev: event.Ready, Rank: cfg.Rank, PID: os.Getpid()})
	r := &rank{o: o, comm: comm, me: cfg.Rank, np: cfg.WorldSize}
	for s := 0; s < o.steps; s++ {
		if o.pace > 0 {
			if err := ringtail.Sleep(ctx, o.pace); err != nil {
				out.Emit(event.Event{Ev: event.Failed, Rank: r.me, Step: s, Err: err.Error(), Blamed: -1})
				return exitFailed
			}
		}
		out.Emit(event.Event{Ev: event.Begin, Rank: r.me, Step: s})
		wrong, err := r.step(ctx, s)
		if err != nil {
			e := event.Event{Ev: event.Failed, Rank: r.me, Step: s, Err: err.Error(), Blamed: -1}
			if b, ok := ringtail.RankOf(err); ok {
				e.Blamed = b
			}
			var re *ringtail.Error
			if errors.As(err, &re) {
				e.Kind, e.Reporter = re.Kind.String(), re.Reporter
			}
			out.Emit(e)
			return exitFailed
		}
		if wrong != "" {
			out.Emit(event.Event{Ev: event.Wrong, Rank: r.me, Step: s, Err: wrong})
			return exitWrong
		}
	}
	out.Emit(event.Event{Ev: event.Done, Rank: r.me, Step: o.steps})
	return 0
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/elastic/shard/service"
	"github.com/ringtail-ml/ringtail/elastic/shard/wal"
	"github.com/ringtail-ml/ringtail/integration/faults/event"
)

// shardSecret reads the job secret the shard roles share.
func shardSecret() ([]byte, error) {
	s := os.Getenv("RINGTAIL_SECRET")
	if len(s) < service.MinSecretLen {
		return nil, fmt.Errorf("RINGTAIL_SECRET must hold at least %d bytes", service.MinSecretLen)
	}
	return []byte(s), nil
}

// runShardService serves a job of o.shards one-sample shards from a store
// in o.dir on o.addr until ctx ends (SIGTERM).
func runShardService(ctx context.Context, o options, out *event.Writer, log logger) int {
	secret, err := shardSecret()
	if err != nil {
		out.Emit(event.Event{Ev: event.Setup, Err: err.Error()})
		return exitSetup
	}
	store, err := wal.Open(o.dir, shard.Config{Samples: int64(o.shards), ShardSize: 1, Epochs: 1}, wal.Options{Logger: log})
	if err != nil {
		out.Emit(event.Event{Ev: event.Setup, Err: err.Error()})
		return exitSetup
	}
	defer store.Close()
	srv, err := service.NewServer(service.ServerConfig{Secret: secret, Logger: log}, store)
	if err != nil {
		out.Emit(event.Event{Ev: event.Setup, Err: err.Error()})
		return exitSetup
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		out.Emit(event.Event{Ev: event.Setup, Err: err.Error()})
		return exitSetup
	}
	out.Emit(event.Event{Ev: event.Listening, Addr: ln.Addr().String(), PID: os.Getpid()})
	if err := srv.Serve(ctx, ln); err != nil {
		out.Emit(event.Event{Ev: event.Failed, Err: err.Error(), Blamed: -1})
		return exitFailed
	}
	return 0
}

// runShardClient pulls and completes every shard of the service at
// o.addr (a real worker of the job), retrying while it is unavailable.
func runShardClient(ctx context.Context, o options, out *event.Writer) int {
	secret, err := shardSecret()
	if err != nil {
		out.Emit(event.Event{Ev: event.Setup, Err: err.Error()})
		return exitSetup
	}
	c, err := service.NewClient(service.ClientConfig{Addr: o.addr, Secret: secret, CallTimeout: 10 * time.Second})
	if err != nil {
		out.Emit(event.Event{Ev: event.Setup, Err: err.Error()})
		return exitSetup
	}
	defer c.Close()
	id := fmt.Sprintf("worker-%d", os.Getpid())
	done := 0
	for {
		s, err := c.Pull(ctx, id)
		switch {
		case errors.Is(err, shard.ErrFinished):
			out.Emit(event.Event{Ev: event.Done, N: done})
			return 0
		case errors.Is(err, shard.ErrNoShard), errors.Is(err, service.ErrUnavailable) && ctx.Err() == nil:
			time.Sleep(5 * time.Millisecond)
			continue
		case err != nil:
			out.Emit(event.Event{Ev: event.Failed, Err: err.Error(), Blamed: -1})
			return exitFailed
		}
		for {
			err := c.Done(ctx, id, s.ID)
			if err == nil {
				break
			}
			if !errors.Is(err, service.ErrUnavailable) || ctx.Err() != nil {
				out.Emit(event.Event{Ev: event.Failed, Err: err.Error(), Blamed: -1})
				return exitFailed
			}
			time.Sleep(5 * time.Millisecond)
		}
		done++
	}
}

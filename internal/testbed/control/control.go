package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// EnvSocket names the variable that holds the control socket's path in
// the environment of a command run on a bed.
const EnvSocket = "TB_CONTROL"

// MaxMessage bounds a request and a reply, in bytes.
const MaxMessage = 64 << 10

// IOTimeout bounds the server's reading of a request and writing of its
// reply; a request's action (tc, nft, starting a proxy) is bounded by the
// server's context.
const IOTimeout = 10 * time.Second

// CallTimeout bounds a Client call whose context has no earlier deadline:
// the request, the bed's action and the reply.
const CallTimeout = time.Minute

// Bed is what the control socket acts on (internal/testbed.Shaper).
type Bed interface {
	// SetLinks makes the links those of spec's link clauses
	// (straggler/inject syntax; "" unshapes every link), every host not
	// named unshaped.
	SetLinks(ctx context.Context, spec string) error
	// Stall holds the link of rank's host for d from now.
	Stall(rank int, d time.Duration) error
}

// Ops of a request.
const (
	opLinks = "links"
	opStall = "stall"
)

// request is one call.
type request struct {
	Op    string        `json:"op"`
	Spec  string        `json:"spec,omitempty"`
	Rank  int           `json:"rank,omitempty"`
	Stall time.Duration `json:"stall_ns,omitempty"`
}

// reply answers a request; Error is empty on success.
type reply struct {
	Error string `json:"error,omitempty"`
}

// ErrRefused is wrapped by Client errors the bed reported (a bad spec, a
// stall on a host without a proxy), as opposed to failures to reach it.
var ErrRefused = errors.New("test bed refused the request")

// Serve answers requests on ln with bed, one connection at a time (so
// requests never interleave), until ctx ends or ln is closed; it closes
// ln when ctx ends. It returns nil when ctx ended.
func Serve(ctx context.Context, ln net.Listener, bed Bed) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("testbed control: %w", err)
		}
		serveConn(ctx, c, bed)
	}
}

// serveConn reads one request from c, acts on it and replies.
func serveConn(ctx context.Context, c net.Conn, bed Bed) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(IOTimeout))
	var req request
	if err := json.NewDecoder(io.LimitReader(c, MaxMessage)).Decode(&req); err != nil {
		_ = json.NewEncoder(c).Encode(reply{Error: "malformed request: " + err.Error()})
		return
	}
	err := handle(ctx, req, bed)
	rep := reply{}
	if err != nil {
		rep.Error = err.Error()
	}
	_ = c.SetDeadline(time.Now().Add(IOTimeout))
	_ = json.NewEncoder(c).Encode(rep)
}

func handle(ctx context.Context, req request, bed Bed) error {
	switch req.Op {
	case opLinks:
		return bed.SetLinks(ctx, req.Spec)
	case opStall:
		if req.Rank < 0 || req.Stall <= 0 {
			return fmt.Errorf("stall of rank %d for %v: want a rank ≥ 0 and a duration > 0", req.Rank, req.Stall)
		}
		return bed.Stall(req.Rank, req.Stall)
	default:
		return fmt.Errorf("unknown op %q (want %s or %s)", req.Op, opLinks, opStall)
	}
}

// Client calls a bed's control socket. The zero value is unusable; Path
// is the socket (the value of TB_CONTROL).
type Client struct {
	Path string
}

// SetLinks asks the bed to make its links those of spec's link clauses,
// every host not named unshaped. Connections opened before it keep the
// delay they had (see internal/testbed.Bed.SetLink).
func (c Client) SetLinks(ctx context.Context, spec string) error {
	return c.call(ctx, request{Op: opLinks, Spec: spec})
}

// Stall asks the bed to hold the link of rank's host for d from now. The
// host must have a proxy (a link clause with a stall or a delay).
func (c Client) Stall(ctx context.Context, rank int, d time.Duration) error {
	return c.call(ctx, request{Op: opStall, Rank: rank, Stall: d})
}

func (c Client) call(ctx context.Context, req request) error {
	if c.Path == "" {
		return fmt.Errorf("testbed control: no socket path (%s unset)", EnvSocket)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Path)
	if err != nil {
		return fmt.Errorf("testbed control %s: %w", c.Path, err)
	}
	defer conn.Close()
	dl := time.Now().Add(CallTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err() // the context ended the write (its deadline was set to now)
		}
		return fmt.Errorf("testbed control %s: sending %s: %w", c.Path, req.Op, err)
	}
	var rep reply
	if err := json.NewDecoder(io.LimitReader(conn, MaxMessage)).Decode(&rep); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("testbed control %s: reply to %s: %w", c.Path, req.Op, err)
	}
	if rep.Error != "" {
		return fmt.Errorf("testbed control: %s: %w: %s", req.Op, ErrRefused, rep.Error)
	}
	return nil
}

package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/internal/settings"
)

// EnvAddr names the shard service's host:port in a rank's environment
// (`ringtail run --elastic` sets it).
const EnvAddr = "RINGTAIL_SHARD_SERVICE"

// ClientConfig configures a Client.
type ClientConfig struct {
	// Addr is the coordinator's host:port.
	Addr string
	// Secret is the job secret.
	Secret []byte
	// DialTimeout bounds connecting and authenticating (0: 5 s).
	DialTimeout time.Duration
	// CallTimeout bounds one call when the context has no earlier
	// deadline (0: 30 s).
	CallTimeout time.Duration
	// Dial replaces net.Dialer.DialContext (tests, custom transports).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Job, if set, is the job's data, declared on every new connection: a
	// service started without a store (a launcher's) opens its store for
	// it, one restarted from its directory checks it, and a service
	// holding another job's data refuses it (wal.ErrConfigMismatch).
	Job *shard.Config
}

// Validate reports unusable configuration.
func (c ClientConfig) Validate() error {
	if c.Addr == "" && c.Dial == nil {
		return errors.New("service: client needs an address")
	}
	if err := settings.CheckSecret(c.Secret); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	if c.DialTimeout < 0 || c.CallTimeout < 0 {
		return errors.New("service: negative timeout")
	}
	if c.Job != nil {
		return c.Job.Validate()
	}
	return nil
}

// Client is a worker's connection to the shard service. It connects on
// first use and reconnects on the next call after a broken connection.
// Calls are serialised; it is safe for concurrent use.
type Client struct {
	cfg    ClientConfig
	sem    chan struct{} // holds the connection state below
	conn   net.Conn
	nextID uint64
	closed bool
}

// NewClient returns a client; it does not connect yet.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = d.DialContext
	}
	return &Client{cfg: cfg, sem: make(chan struct{}, 1)}, nil
}

// Pull asks for the next shard for worker. shard.ErrNoShard means retry
// later; shard.ErrFinished means the job's data is exhausted.
func (c *Client) Pull(ctx context.Context, worker string) (shard.Shard, error) {
	resp, err := c.call(ctx, request{Op: opPull, Worker: worker})
	if err != nil {
		return shard.Shard{}, err
	}
	if resp.Shard == nil {
		return shard.Shard{}, fmt.Errorf("%w: pull answered without a shard", ErrProtocol)
	}
	return *resp.Shard, nil
}

// Done reports that worker finished shardID and its gradients are applied.
// Reports the service counts as duplicates still succeed.
func (c *Client) Done(ctx context.Context, worker string, shardID int64) error {
	_, err := c.call(ctx, request{Op: opDone, Worker: worker, Shard: shardID})
	return err
}

// Fail reports that worker gave up on shardID; it goes back to TODO.
func (c *Client) Fail(ctx context.Context, worker string, shardID int64) error {
	_, err := c.call(ctx, request{Op: opFail, Worker: worker, Shard: shardID})
	return err
}

// Stats returns the queue's summary.
func (c *Client) Stats(ctx context.Context) (shard.Stats, error) {
	resp, err := c.call(ctx, request{Op: opStats})
	if err != nil {
		return shard.Stats{}, err
	}
	if resp.Stats == nil {
		return shard.Stats{}, fmt.Errorf("%w: stats answered without stats", ErrProtocol)
	}
	return *resp.Stats, nil
}

// Close drops the connection; later calls fail with ErrClosed. Dropping
// the connection tells the service this worker is gone (its DOING shard
// returns to TODO). It waits for a call in flight to finish.
func (c *Client) Close() error {
	c.sem <- struct{}{}
	defer func() { <-c.sem }()
	c.closed = true
	if c.conn != nil {
		err := c.conn.Close()
		c.conn = nil
		return err
	}
	return nil
}

func (c *Client) call(ctx context.Context, req request) (response, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return response{}, ctx.Err()
	}
	defer func() { <-c.sem }()
	if c.closed {
		return response{}, ErrClosed
	}
	if c.conn == nil {
		if err := c.connect(ctx); err != nil {
			return response{}, err
		}
	}
	return c.exchange(ctx, req)
}

// exchange sends req on the connection and reads its response; it holds
// c.sem. A broken exchange drops the connection.
func (c *Client) exchange(ctx context.Context, req request) (response, error) {
	c.nextID++
	req.ID = c.nextID
	deadline := time.Now().Add(c.cfg.CallTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn := c.conn
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	var resp response
	err := writeMsg(conn, req)
	if err == nil {
		err = readMsg(conn, &resp)
	}
	stop()
	if err == nil && resp.ID != req.ID {
		err = fmt.Errorf("%w: response %d to request %d", ErrProtocol, resp.ID, req.ID)
	}
	if err != nil {
		// The connection's state is unknown: drop it, redial next time.
		conn.Close()
		c.conn = nil
		if ctx.Err() != nil {
			return response{}, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
		if errors.Is(err, ErrProtocol) {
			return response{}, err
		}
		return response{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if e := fromWire(resp.Error); e != nil {
		return response{}, e
	}
	return resp, nil
}

func (c *Client) connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	conn, err := c.cfg.Dial(ctx, "tcp", c.cfg.Addr)
	if err != nil {
		return fmt.Errorf("%w: dial %s: %v", ErrUnavailable, c.cfg.Addr, err)
	}
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	err = clientHandshake(conn, c.cfg.Secret)
	stop()
	if err != nil {
		conn.Close()
		if errors.Is(err, ErrAuth) || errors.Is(err, ErrProtocol) {
			return err
		}
		return fmt.Errorf("%w: handshake with %s: %v", ErrUnavailable, c.cfg.Addr, err)
	}
	conn.SetDeadline(time.Time{})
	c.conn = conn
	if c.cfg.Job != nil {
		if _, err := c.exchange(ctx, request{Op: opOpen, Config: c.cfg.Job}); err != nil {
			return err
		}
	}
	return nil
}

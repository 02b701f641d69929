package ringtail

import (
	"context"
	"errors"
	"time"

	"github.com/ringtail-ml/ringtail/internal/engine"
)

// AnySource, as the source of Mailbox.Post, matches a message from any
// rank.
const AnySource = engine.AnySource

// MaxTag is the largest tag a Mailbox caller may use; the tags above it
// are the mailbox's own (MonitoredBarrier).
const MaxTag = engine.MaxUserTag

// DefaultMailboxBuffer bounds, by default, the bytes of messages that have
// arrived but match no posted receive yet.
const DefaultMailboxBuffer = engine.DefaultMailboxBuffer

// ErrCanceled is the error of a receive withdrawn by Cancel.
var ErrCanceled = engine.ErrCanceled

// Mailbox sends and receives tagged point-to-point messages (the
// send/recv/isend/irecv of MPI and torch.distributed) on a Comm, with
// MPI's matching rules: a receive names a source rank (or AnySource)
// and a tag, and takes the earliest-arrived message that matches and that
// no receive posted before it matches; messages from one rank with one
// tag are received in the order they were sent.
//
// A Mailbox takes only Mailbox messages off the links; contributions stay
// for Comm.NextContribution, TakeContribution and AllReduceTree, which may
// wait at the same time. Create one Mailbox per Comm, right after New:
// messages that arrive before it exists wait in the links' small queue
// that, when full, stalls the links they came on.
//
// Messages that arrive before their receive is posted are buffered up to
// a limit (DefaultMailboxBuffer); past it the mailbox stops taking new
// messages until a receive takes one, and senders wait (and fail at the
// operation timeout if nothing is ever received). The limit bounds what
// the Mailbox holds; a NextContribution waiting meanwhile reads past
// Mailbox messages and keeps them in the communicator until the Mailbox
// takes them.
//
// Messages are eager, like contributions (Comm.Contribute): a sender never
// waits for the receiver, whose links buffer each message whole, so two
// ranks may both send before they receive, and point-to-point traffic
// runs beside collectives on the same communicator, at the price of one
// copy on the receiving side. A Mailbox's messages and contributions never
// meet, whatever their tags (internal/engine.Class); the protocol is
// internal/engine's Mailbox.
type Mailbox struct{ m *engine.Mailbox }

// NewMailbox starts the mailbox of c: a goroutine that takes arriving
// Mailbox messages off c's links, one that fails the receives posted for
// a rank that died, and one that sends, in order. bufferLimit bounds
// the bytes of unclaimed messages (zero: DefaultMailboxBuffer). Close it
// before closing c.
func NewMailbox(c *Comm, bufferLimit int) (*Mailbox, error) {
	m, err := engine.NewMailbox(c.e, bufferLimit, public)
	if err != nil {
		return nil, err
	}
	return &Mailbox{m}, nil
}

// Receive is a posted receive; Wait for it.
type Receive = engine.Receive

// Sending is a send in progress; Wait for it.
type Sending = engine.Sending

// Start queues buf for rank peer with tag and returns at once; the
// message leaves after every message started before it. buf must not
// change until the Sending is done.
func (m *Mailbox) Start(peer, tag int, buf Buffer) (*Sending, error) {
	if err := errors.Join(m.m.Check("send", peer, false, tag), checkBuffer("send", buf)); err != nil {
		return nil, err
	}
	return m.m.Start(peer, uint32(tag), buf.Bytes, buf.DType)
}

// Send sends buf to rank peer with tag and returns once the message is
// handed to the transport (the receiver need not have posted a receive).
func (m *Mailbox) Send(ctx context.Context, peer, tag int, buf Buffer) error {
	s, err := m.Start(peer, tag, buf)
	if err != nil {
		return err
	}
	return s.Wait(ctx)
}

// Post posts a receive of one message from rank from (or AnySource) with
// tag into buf and returns at once; buf must stay untouched until the
// Receive is done. The message must hold exactly buf's bytes and element
// type, else the receive fails with a KindMismatch *Error naming the
// sender (the message is consumed, the communicator stays usable).
func (m *Mailbox) Post(from, tag int, buf Buffer) (*Receive, error) {
	if err := errors.Join(m.m.Check("receive", from, true, tag), checkBuffer("receive", buf)); err != nil {
		return nil, err
	}
	return m.m.Post(from, uint32(tag), buf.Bytes, buf.DType)
}

// Recv posts a receive and waits for it; it returns the sender's rank.
func (m *Mailbox) Recv(ctx context.Context, from, tag int, buf Buffer) (int, error) {
	r, err := m.Post(from, tag, buf)
	if err != nil {
		return AnySource, err
	}
	return r.Wait(ctx)
}

// Close stops the mailbox: sends not yet handed to the transport and
// posted receives fail with ErrClosed, unclaimed messages are dropped.
// Safe to call twice.
func (m *Mailbox) Close() error { return m.m.Close() }

// MissingRanksError is the failure of MonitoredBarrier: the ranks that did
// not reach it within Timeout, as rank 0 saw them (Rank, when not 0,
// reached the barrier and relays rank 0's verdict). Its text is Gloo's.
type MissingRanksError = engine.MissingRanksError

// BarrierMemberError is the failure of MonitoredBarrier on a rank other
// than 0 that arrived but heard no verdict from rank 0 in time.
type BarrierMemberError = engine.BarrierMemberError

// MonitoredBarrier is a barrier that names the ranks that did not arrive
// (torch.distributed.monitored_barrier, with ProcessGroupGloo's semantics
// and words): every rank tells rank 0 it has arrived; rank 0 waits at
// most timeout for them, in rank order (for the first missing rank only,
// unless waitAll; a zero timeout leaves it no time: it reports that it
// timed out itself) and tells every rank the verdict. On rank 0 the
// missing ranks become a *MissingRanksError; the ranks that arrived
// return the same error, relayed; a rank that hears nothing from rank 0
// within the operation timeout (at least twice timeout) returns a
// *BarrierMemberError. The communicator stays usable: a late rank's
// arrival is recognised as stale by the next barrier. Calls are
// serialised.
func (m *Mailbox) MonitoredBarrier(ctx context.Context, timeout time.Duration, waitAll bool) error {
	return m.m.MonitoredBarrier(ctx, timeout, waitAll)
}

//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
)

// Return codes; they must equal the RT_* macros of include/ringtail.h (a
// test checks).
const (
	codeOK       = 0
	codeInvalid  = 1
	codeInit     = 2
	codePeerDied = 3
	codeSilent   = 4
	codeTimeout  = 5
	codeMismatch = 6
	codeCanceled = 7
	codeProtocol = 8
	codeClosed   = 9
	codeAuth     = 10
	codeLocal    = 11
	codeOther    = 12
	// codeIntegrity came after codeOther within ABI version 2: appended
	// codes are compatible (callers treat an unknown code as other).
	codeIntegrity = 13
)

// abiVersion is RT_ABI_VERSION. Version 2 added all-to-all, tagged
// point-to-point requests and the monitored barrier (and, as new
// functions only, the straggler driver and rt_call_site).
const abiVersion = 2

// dtypeOf maps an RT_* element type code to its ringtail type.
func dtypeOf(code int) (ringtail.DType, bool) {
	switch code {
	case 1:
		return ringtail.Float32, true
	case 2:
		return ringtail.Float64, true
	case 3:
		return ringtail.Int32, true
	case 4:
		return ringtail.Int64, true
	case 5:
		return ringtail.Float16, true
	case 6:
		return ringtail.BFloat16, true
	case 7:
		return ringtail.Uint8, true
	}
	return 0, false
}

// opOf maps an RT_* reduction code to its ringtail operator.
func opOf(code int) (ringtail.Op, bool) {
	switch code {
	case 1:
		return ringtail.Sum, true
	case 2:
		return ringtail.Prod, true
	case 3:
		return ringtail.Min, true
	case 4:
		return ringtail.Max, true
	case 5:
		return ringtail.Avg, true
	}
	return 0, false
}

// argError is a bad argument: nothing was sent, the communicator is intact.
type argError struct{ msg string }

func (e *argError) Error() string { return "capi: " + e.msg }

func badArg(format string, args ...any) error { return &argError{fmt.Sprintf(format, args...)} }

// initError is a failure of rt_init.
type initError struct{ err error }

func (e *initError) Error() string { return e.err.Error() }
func (e *initError) Unwrap() error { return e.err }

// session is what a handle refers to: one communicator and the context its
// operations run under, which rt_abort cancels.
type session struct {
	comm   *ringtail.Comm
	mail   *ringtail.Mailbox // tagged point-to-point messages (p2p.go)
	ctx    context.Context
	cancel context.CancelFunc
	log    zerolog.Logger // the configuration's (RINGTAIL_LOG_LEVEL), for the straggler driver
	// observer, when set (rt_observe_with), is the session of this process
	// whose observability records this one's steps and progress. Set
	// before the session's first straggler driver; read-only after.
	observer atomic.Uint64
	site     atomic.Pointer[string] // the call site of the coming collectives (rt_call_site); nil: none
}

// callCtx is the context of a collective: the session's, naming the call
// site rt_call_site set, if any (RINGTAIL_DEBUG=detail checks it).
func (s *session) callCtx() context.Context {
	if p := s.site.Load(); p != nil {
		return ringtail.WithCallSite(s.ctx, *p)
	}
	return s.ctx
}

// setSite names the call site of the coming collectives ("": none).
func (s *session) setSite(site string) {
	if site == "" {
		s.site.Store(nil)
		return
	}
	s.site.Store(&site)
}

// open joins the job described by the environment and overrides.
func open(overrides string) (*session, error) {
	cfg, err := configFromEnv(overrides)
	if err != nil {
		return nil, &initError{err}
	}
	ctx, cancel := context.WithCancel(context.Background())
	comm, err := ringtail.New(ctx, cfg)
	if err != nil {
		cancel()
		return nil, &initError{fmt.Errorf("capi: init rank %d of %d: %w", cfg.Rank, cfg.WorldSize, err)}
	}
	// The mailbox starts with the communicator: messages a peer sends
	// before this rank's first receive must not stall the links.
	mail, err := ringtail.NewMailbox(comm, 0)
	if err != nil {
		comm.Close()
		cancel()
		return nil, &initError{err}
	}
	return &session{comm: comm, mail: mail, ctx: ctx, cancel: cancel, log: cfg.Logger}, nil
}

// buffer views count elements of dtype code dt at p, checking every
// argument.
func buffer(p unsafe.Pointer, count int64, dt int, what string) (ringtail.Buffer, error) {
	d, ok := dtypeOf(dt)
	if !ok {
		return ringtail.Buffer{}, badArg("%s: unknown dtype code %d (want 1..7, see ringtail.h)", what, dt)
	}
	if count < 0 {
		return ringtail.Buffer{}, badArg("%s: negative count %d", what, count)
	}
	size := int64(d.Size())
	if count > math.MaxInt/size {
		return ringtail.Buffer{}, badArg("%s: count %d overflows", what, count)
	}
	if count == 0 {
		return ringtail.Raw([]byte{}, d), nil
	}
	if p == nil {
		return ringtail.Buffer{}, badArg("%s: NULL pointer with count %d", what, count)
	}
	return ringtail.Raw(unsafe.Slice((*byte)(p), count*size), d), nil
}

func op(code int) (ringtail.Op, error) {
	o, ok := opOf(code)
	if !ok {
		return 0, badArg("unknown op code %d (want 1..5, see ringtail.h)", code)
	}
	return o, nil
}

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// detach returns b, or a copy of b when it overlaps dst, so a collective
// never reads memory it is writing.
func detach(b, dst ringtail.Buffer) ringtail.Buffer {
	if !overlaps(b.Bytes, dst.Bytes) {
		return b
	}
	return ringtail.Raw(append([]byte(nil), b.Bytes...), b.DType)
}

func (s *session) allReduce(p unsafe.Pointer, count int64, dt, opCode int) error {
	buf, err := buffer(p, count, dt, "allreduce")
	if err != nil {
		return err
	}
	o, err := op(opCode)
	if err != nil {
		return err
	}
	return s.comm.AllReduce(s.callCtx(), buf, o)
}

func (s *session) broadcast(p unsafe.Pointer, count int64, dt, root int) error {
	buf, err := buffer(p, count, dt, "broadcast")
	if err != nil {
		return err
	}
	if root < 0 || root >= s.comm.Size() {
		return badArg("broadcast: root %d outside 0..%d", root, s.comm.Size()-1)
	}
	return s.comm.Broadcast(s.callCtx(), buf, root)
}

func (s *session) allGather(send, recv unsafe.Pointer, count int64, dt int) error {
	w := int64(s.comm.Size())
	if count > math.MaxInt64/w {
		return badArg("allgather: count %d overflows", count)
	}
	sb, err := buffer(send, count, dt, "allgather send")
	if err != nil {
		return err
	}
	rb, err := buffer(recv, count*w, dt, "allgather recv")
	if err != nil {
		return err
	}
	return s.comm.AllGather(s.callCtx(), detach(sb, rb), rb)
}

func (s *session) reduceScatter(send, recv unsafe.Pointer, recvCount int64, dt, opCode int) error {
	w := int64(s.comm.Size())
	if recvCount > math.MaxInt64/w {
		return badArg("reduce_scatter: count %d overflows", recvCount)
	}
	sb, err := buffer(send, recvCount*w, dt, "reduce_scatter send")
	if err != nil {
		return err
	}
	rb, err := buffer(recv, recvCount, dt, "reduce_scatter recv")
	if err != nil {
		return err
	}
	o, err := op(opCode)
	if err != nil {
		return err
	}
	return s.comm.ReduceScatter(s.callCtx(), detach(sb, rb), rb, o)
}

func (s *session) barrier() error { return s.comm.Barrier(s.callCtx()) }

// close leaves the job; abort first makes it not wait for an operation in
// flight.
func (s *session) close() error {
	s.mail.Close()
	err := s.comm.Close()
	s.cancel()
	return err
}

// abort makes the operation in flight and every later one fail: the
// collectives' context is canceled and the mailbox closed (posted
// receives and queued sends fail).
func (s *session) abort() {
	s.cancel()
	s.mail.Close()
}

// code maps an error to an RT_* return code.
func code(err error) int {
	if err == nil {
		return codeOK
	}
	var ae *argError
	if errors.As(err, &ae) {
		return codeInvalid
	}
	var ie *initError
	if errors.As(err, &ie) {
		return codeInit
	}
	if errors.Is(err, ringtail.ErrClosed) {
		return codeClosed
	}
	if errors.Is(err, ringtail.ErrCanceled) {
		return codeCanceled
	}
	var mr *ringtail.MissingRanksError
	var rt *requestTimeout
	if errors.As(err, &mr) || errors.As(err, &rt) {
		return codeTimeout
	}
	var re *ringtail.Error
	if errors.As(err, &re) {
		switch re.Kind {
		case ringtail.KindPeerDied:
			return codePeerDied
		case ringtail.KindSilent:
			return codeSilent
		case ringtail.KindTimeout:
			return codeTimeout
		case ringtail.KindMismatch:
			return codeMismatch
		case ringtail.KindCanceled:
			return codeCanceled
		case ringtail.KindProtocol:
			return codeProtocol
		case ringtail.KindClosed:
			return codeClosed
		case ringtail.KindLocal:
			return codeLocal
		case ringtail.KindAuth:
			return codeAuth
		case ringtail.KindIntegrity:
			return codeIntegrity
		}
	}
	if errors.Is(err, context.Canceled) {
		return codeCanceled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return codeTimeout
	}
	return codeOther
}

// requestTimeout is rt_wait's timeout: the request is still valid.
type requestTimeout struct{ d time.Duration }

func (e *requestTimeout) Error() string {
	return fmt.Sprintf("capi: request not finished within %v (it is still valid: wait again or rt_cancel it)", e.d)
}

package main

/*
#include <stdint.h>
#include "include/ringtail.h"
*/
import "C"

import (
	"context"
	"math"
	"runtime/cgo"
	"time"
	"unsafe"

	"github.com/ringtail-ml/ringtail"
)

// This file holds the calls added in ABI version 2: all-to-all, tagged
// point-to-point requests (rt_isend, rt_irecv, rt_wait, rt_test,
// rt_cancel) and the monitored barrier.

// request is what an rt_request handle refers to: one send or receive of
// a session's mailbox.
type request struct {
	s    *session
	send *ringtail.Sending
	recv *ringtail.Receive
}

func (q *request) done() <-chan struct{} {
	if q.send != nil {
		return q.send.Done()
	}
	return q.recv.Done()
}

func lookupRequest(h C.rt_request) (q *request, err error) {
	if h == 0 {
		return nil, badArg("request 0 is not a request")
	}
	defer func() {
		if r := recover(); r != nil {
			err = badArg("request %d is not a live request (already waited for?)", uint64(h))
		}
	}()
	q, ok := cgo.Handle(h).Value().(*request)
	if !ok {
		return nil, badArg("handle %d is not a request", uint64(h))
	}
	return q, nil
}

func (s *session) allToAll(send, recv unsafe.Pointer, count int64, dt int) error {
	w := int64(s.comm.Size())
	if count > math.MaxInt64/w {
		return badArg("alltoall: count %d overflows", count)
	}
	sb, err := buffer(send, count*w, dt, "alltoall send")
	if err != nil {
		return err
	}
	rb, err := buffer(recv, count*w, dt, "alltoall recv")
	if err != nil {
		return err
	}
	return s.comm.AllToAll(s.callCtx(), detach(sb, rb), rb)
}

// counts reads the world's int64 split sizes at p.
func (s *session) counts(p unsafe.Pointer, what string) ([]int, int64, error) {
	w := s.comm.Size()
	if p == nil {
		return nil, 0, badArg("alltoallv: %s counts are NULL", what)
	}
	raw := unsafe.Slice((*int64)(p), w)
	out := make([]int, w)
	var total int64
	for r, v := range raw {
		if v < 0 {
			return nil, 0, badArg("alltoallv: %s count %d for rank %d", what, v, r)
		}
		out[r] = int(v)
		if total += v; total < 0 {
			return nil, 0, badArg("alltoallv: %s counts overflow", what)
		}
	}
	return out, total, nil
}

func (s *session) allToAllV(send, sendCounts, recv, recvCounts unsafe.Pointer, dt int) error {
	sc, st, err := s.counts(sendCounts, "send")
	if err != nil {
		return err
	}
	rc, rt, err := s.counts(recvCounts, "receive")
	if err != nil {
		return err
	}
	sb, err := buffer(send, st, dt, "alltoallv send")
	if err != nil {
		return err
	}
	rb, err := buffer(recv, rt, dt, "alltoallv recv")
	if err != nil {
		return err
	}
	return s.comm.AllToAllV(s.callCtx(), detach(sb, rb), sc, rb, rc)
}

func (s *session) isend(p unsafe.Pointer, count int64, dt, peer, tag int) (*request, error) {
	b, err := buffer(p, count, dt, "isend")
	if err != nil {
		return nil, err
	}
	snd, err := s.mail.Start(peer, tag, b)
	if err != nil {
		return nil, argOr(err)
	}
	return &request{s: s, send: snd}, nil
}

func (s *session) irecv(p unsafe.Pointer, count int64, dt, source, tag int) (*request, error) {
	b, err := buffer(p, count, dt, "irecv")
	if err != nil {
		return nil, err
	}
	rcv, err := s.mail.Post(source, tag, b)
	if err != nil {
		return nil, argOr(err)
	}
	return &request{s: s, recv: rcv}, nil
}

// argOr marks a mailbox error that is about the arguments (not the
// communicator's state) as RT_ERR_INVALID.
func argOr(err error) error {
	if code(err) == codeOther {
		return badArg("%v", err)
	}
	return err
}

// wait waits up to timeout (negative: no limit) for q. It reports whether
// q finished (and so may be freed), the sender's rank for a receive, and
// the request's error. After rt_abort every request finishes at once
// (the mailbox is closed).
func (q *request) wait(timeout time.Duration) (finished bool, source int, err error) {
	var expired <-chan time.Time
	if timeout >= 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-q.done(): // finished already: never lose the race to a zero timeout
	default:
		select {
		case <-q.done():
		case <-expired:
			return false, -1, &requestTimeout{timeout}
		}
	}
	ctx := context.Background() // done: Wait returns at once
	if q.send != nil {
		return true, -1, q.send.Wait(ctx)
	}
	src, err := q.recv.Wait(ctx)
	return true, src, err
}

//export rt_alltoall
func rt_alltoall(h C.rt_comm, send, recv unsafe.Pointer, count C.int64_t, dtype C.int, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err == nil {
		err = s.allToAll(send, recv, int64(count), int(dtype))
	}
	return setError(err, errbuf, errlen)
}

//export rt_alltoallv
func rt_alltoallv(h C.rt_comm, send unsafe.Pointer, sendCounts *C.int64_t, recv unsafe.Pointer, recvCounts *C.int64_t, dtype C.int, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err == nil {
		err = s.allToAllV(send, unsafe.Pointer(sendCounts), recv, unsafe.Pointer(recvCounts), int(dtype))
	}
	return setError(err, errbuf, errlen)
}

//export rt_isend
func rt_isend(h C.rt_comm, buf unsafe.Pointer, count C.int64_t, dtype, peer, tag C.int, out *C.rt_request, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	if out == nil {
		return setError(badArg("rt_isend: request is NULL"), errbuf, errlen)
	}
	s, err := lookup(h)
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	q, err := s.isend(buf, int64(count), int(dtype), int(peer), int(tag))
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	*out = C.rt_request(cgo.NewHandle(q))
	return C.RT_OK
}

//export rt_irecv
func rt_irecv(h C.rt_comm, buf unsafe.Pointer, count C.int64_t, dtype, source, tag C.int, out *C.rt_request, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	if out == nil {
		return setError(badArg("rt_irecv: request is NULL"), errbuf, errlen)
	}
	s, err := lookup(h)
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	q, err := s.irecv(buf, int64(count), int(dtype), int(source), int(tag))
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	*out = C.rt_request(cgo.NewHandle(q))
	return C.RT_OK
}

//export rt_wait
func rt_wait(h C.rt_request, timeoutMs C.int64_t, source, done *C.int, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	q, err := lookupRequest(h)
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	timeout := time.Duration(-1)
	if timeoutMs >= 0 {
		timeout = time.Duration(timeoutMs) * time.Millisecond
	}
	finished, src, err := q.wait(timeout)
	if done != nil {
		*done = 0
	}
	if !finished {
		return setError(err, errbuf, errlen)
	}
	cgo.Handle(h).Delete()
	if done != nil {
		*done = 1
	}
	if source != nil {
		*source = C.int(src)
	}
	return setError(err, errbuf, errlen)
}

//export rt_test
func rt_test(h C.rt_request, done *C.int, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	q, err := lookupRequest(h)
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	if done == nil {
		return setError(badArg("rt_test: done is NULL"), errbuf, errlen)
	}
	select {
	case <-q.done():
		*done = 1
	default:
		*done = 0
	}
	return C.RT_OK
}

//export rt_cancel
func rt_cancel(h C.rt_request) (rc C.int) {
	defer guard(&rc, nil, 0)
	q, err := lookupRequest(h)
	if err != nil {
		return C.int(code(err))
	}
	if q.recv != nil {
		q.recv.Cancel()
	}
	<-q.done() // a send ends at the operation timeout at the latest
	cgo.Handle(h).Delete()
	return C.RT_OK
}

//export rt_monitored_barrier
func rt_monitored_barrier(h C.rt_comm, timeoutMs C.int64_t, waitAll C.int, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err == nil {
		if timeoutMs < 0 {
			err = badArg("monitored_barrier: timeout %d ms must not be negative", int64(timeoutMs))
		} else {
			err = s.mail.MonitoredBarrier(s.ctx, time.Duration(timeoutMs)*time.Millisecond, waitAll != 0)
		}
	}
	return setError(err, errbuf, errlen)
}

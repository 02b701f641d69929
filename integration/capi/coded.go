package main

/*
#include <stdint.h>
#include "include/ringtail.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/cgo"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/ringtail-ml/ringtail/gradcode"
	"github.com/ringtail-ml/ringtail/gradcode/coded"
)

// This file holds the rt_coded_* calls: gradient coding (gradcode/coded)
// on flat float32 buffers owned by the caller. The plan, the encoding and
// the decode stay in Go; the caller computes its partitions' gradients
// and reads back the decoded sum.

// codedRun is what an rt_coded handle refers to: one Coder on a session's
// communicator. mu serialises calls (a Coder is used by one goroutine at a
// time; C callers may call from any thread).
type codedRun struct {
	mu    sync.Mutex
	s     *session
	c     *coded.Coder
	len   int
	k     int
	parts []int
	sum   []float64
}

// withCoded runs f on the run of handle h, holding its lock.
func withCoded(h C.rt_coded, f func(r *codedRun) error) error {
	r, err := lookupCoded(h)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return f(r)
}

// lookupCoded returns the run of handle h.
func lookupCoded(h C.rt_coded) (r *codedRun, err error) {
	if h == 0 {
		return nil, badArg("coded handle 0 is not a coder")
	}
	defer func() {
		if rec := recover(); rec != nil {
			err = badArg("coded handle %d is not a live coder (closed?)", uint64(h))
		}
	}()
	r, ok := cgo.Handle(h).Value().(*codedRun)
	if !ok {
		return nil, badArg("handle %d is not a coder", uint64(h))
	}
	return r, nil
}

//export rt_coded_open
func rt_coded_open(h C.rt_comm, length C.int64_t, s C.int, scheme *C.char, throughputs *C.double, seed C.int64_t,
	timeoutMS C.int64_t, out *C.rt_coded, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	if out == nil {
		return setError(badArg("rt_coded_open: out is NULL"), errbuf, errlen)
	}
	sess, err := lookup(h)
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	var thr []float64
	if throughputs != nil {
		thr = slices.Clone(unsafe.Slice((*float64)(unsafe.Pointer(throughputs)), sess.comm.Size()))
	}
	name := ""
	if scheme != nil {
		name = C.GoString(scheme)
	}
	r, err := openCoded(sess, int64(length), int(s), name, thr, int64(seed), int64(timeoutMS))
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	*out = C.rt_coded(cgo.NewHandle(r))
	return C.RT_OK
}

// openCoded plans coding on s's communicator, checking every argument.
func openCoded(s *session, length int64, st int, scheme string, thr []float64, seed, timeoutMS int64) (*codedRun, error) {
	if scheme == "" {
		scheme = string(gradcode.Hetero)
	}
	switch {
	case length < 1 || length > 1<<31:
		return nil, badArg("rt_coded_open: length %d outside 1..2^31", length)
	case st < 0 || st >= s.comm.Size():
		return nil, badArg("rt_coded_open: s = %d among %d ranks", st, s.comm.Size())
	case !slices.Contains([]gradcode.Scheme{gradcode.Hetero, gradcode.Group, gradcode.Cyclic}, gradcode.Scheme(scheme)):
		return nil, badArg("rt_coded_open: scheme %q: want hetero, group or cyclic", scheme)
	case timeoutMS < 0:
		return nil, badArg("rt_coded_open: negative timeout %d ms", timeoutMS)
	case slices.ContainsFunc(thr, func(v float64) bool { return !(v > 0) || math.IsInf(v, 0) }):
		return nil, badArg("rt_coded_open: throughputs %v: want positive, finite", thr)
	}
	cfg := coded.Config{Scheme: gradcode.Scheme(scheme), S: st, Len: int(length), Seed: seed,
		StepTimeout: time.Duration(timeoutMS) * time.Millisecond}
	if thr != nil {
		cfg.Throughputs = coded.Static(thr)
	}
	c, err := coded.New(s.comm, cfg)
	if errors.Is(err, coded.ErrConfig) || errors.Is(err, gradcode.ErrInvalidConfig) {
		return nil, badArg("rt_coded_open: %v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("capi: rt_coded_open: %w", err)
	}
	p := c.Plan()
	return &codedRun{s: s, c: c, len: int(length), k: p.K, parts: slices.Clone(p.Assignment[s.comm.Rank()]),
		sum: make([]float64, length)}, nil
}

//export rt_coded_partitions
func rt_coded_partitions(h C.rt_coded, k *C.int64_t, parts *C.int64_t, capacity C.int64_t, nparts *C.int64_t,
	errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	return setError(withCoded(h, func(r *codedRun) error {
		if r.c == nil {
			return badArg("rt_coded_partitions: the coder is closed")
		}
		if nparts != nil {
			*nparts = C.int64_t(len(r.parts))
		}
		if k != nil {
			*k = C.int64_t(r.k)
		}
		if int64(capacity) < int64(len(r.parts)) || (len(r.parts) > 0 && parts == nil) {
			return badArg("rt_coded_partitions: room for %d partitions, this rank has %d", int64(capacity), len(r.parts))
		}
		if len(r.parts) > 0 {
			dst := unsafe.Slice((*int64)(unsafe.Pointer(parts)), len(r.parts))
			for i, p := range r.parts {
				dst[i] = int64(p)
			}
		}
		return nil
	}), errbuf, errlen)
}

//export rt_coded_step
func rt_coded_step(h C.rt_coded, grads *C.float, sum *C.float, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	return setError(withCoded(h, func(r *codedRun) error {
		return r.step(unsafe.Pointer(grads), unsafe.Pointer(sum))
	}), errbuf, errlen)
}

// step runs one coded step on the caller's partition gradients and writes
// the decoded sum into the caller's buffer.
func (r *codedRun) step(grads, sum unsafe.Pointer) error {
	switch {
	case r.c == nil:
		return badArg("rt_coded_step: the coder is closed")
	case sum == nil:
		return badArg("rt_coded_step: sum is NULL")
	case grads == nil && len(r.parts) > 0:
		return badArg("rt_coded_step: grads is NULL (this rank has %d partitions)", len(r.parts))
	}
	var g []float32
	if len(r.parts) > 0 {
		g = unsafe.Slice((*float32)(grads), len(r.parts)*r.len)
	}
	// The gradients are computed already: the caller's own lateness is
	// before this call, and the others do not wait for it beyond n−s.
	compute := func(_ context.Context, _, _ int, parts []int, out [][]float64) error {
		for i := range parts {
			for e, x := range g[i*r.len : (i+1)*r.len] {
				out[i][e] = float64(x)
			}
		}
		return nil
	}
	if _, err := r.c.Step(r.s.ctx, compute, r.sum); err != nil {
		return err
	}
	dst := unsafe.Slice((*float32)(sum), r.len)
	for e, x := range r.sum {
		dst[e] = float32(x)
	}
	return nil
}

//export rt_coded_close
func rt_coded_close(h C.rt_coded, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	return setError(withCoded(h, func(r *codedRun) error {
		cgo.Handle(h).Delete()
		if r.c != nil {
			r.c.Close()
			r.c = nil
		}
		return nil
	}), errbuf, errlen)
}

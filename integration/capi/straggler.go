package main

/*
#include <stdint.h>
#include "include/ringtail.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"

	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver"
)

// This file holds the rt_straggler_* calls: the straggler driver
// (straggler/driver) on flat float32 buffers owned by the caller. Every
// decision stays in Go (straggler.Policy, executed by driver.Driver); the
// caller passes its gradient and its state and reads back what happened.

// Flags of rt_straggler_open; they must equal ringtail.h's (a test checks).
const (
	flagEqualShares = 1
	flagProbe       = 2
	flagSampled     = 4
)

// Role and mode codes of rt_straggler_result; equal to ringtail.h's.
const (
	roleMember = int(straggler.RoleMember)
	roleParent = int(straggler.RoleParent)
	roleChild  = int(straggler.RoleChild)

	modeRing    = int(straggler.ModeRing)
	modeOverlap = int(straggler.ModeOverlap)
	modeEvict   = int(straggler.ModeEvict)
	modeExclude = int(straggler.ModeExclude)
)

// stragglerRun is what an rt_straggler handle refers to: one driver on a
// session's communicator. mu serialises calls (a Driver is owned by one
// goroutine at a time; C callers may call from any thread).
type stragglerRun struct {
	mu sync.Mutex
	s  *session
	d  *driver.Driver
	// hasState says rt_straggler_set_state registered the caller's state
	// (C memory, never Go's: the driver reads and writes it inside calls);
	// flushed that the run is over.
	hasState, flushed bool
}

// withStraggler runs f on the run of handle h, holding its lock.
func withStraggler(h C.rt_straggler, f func(r *stragglerRun) error) error {
	r, err := lookupStraggler(h)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return f(r)
}

// lookupStraggler returns the run of handle h.
func lookupStraggler(h C.rt_straggler) (r *stragglerRun, err error) {
	if h == 0 {
		return nil, badArg("straggler handle 0 is not a driver")
	}
	defer func() {
		if rec := recover(); rec != nil {
			err = badArg("straggler handle %d is not a live driver (closed?)", uint64(h))
		}
	}()
	r, ok := cgo.Handle(h).Value().(*stragglerRun)
	if !ok {
		return nil, badArg("handle %d is not a straggler driver", uint64(h))
	}
	return r, nil
}

// stragglerConfig builds the driver's configuration from rt_straggler_open's
// arguments, checking each.
func stragglerConfig(s *session, payload int64, policy string, globalBatch int64, flags int, timeoutMS int64) (driver.Config, error) {
	switch {
	case payload < 0 || payload > 1<<40:
		return driver.Config{}, badArg("straggler: payload %d outside 0..2^40", payload)
	case globalBatch < 1 || globalBatch > 1<<31:
		return driver.Config{}, badArg("straggler: global batch %d outside 1..2^31", globalBatch)
	case flags&^(flagEqualShares|flagProbe|flagSampled) != 0:
		return driver.Config{}, badArg("straggler: unknown flags %#x", flags&^(flagEqualShares|flagProbe|flagSampled))
	case flags&flagEqualShares != 0 && flags&flagSampled != 0:
		return driver.Config{}, badArg("straggler: RT_STRAGGLER_EQUAL_SHARES and RT_STRAGGLER_SAMPLED exclude each other")
	case timeoutMS < 0:
		return driver.Config{}, badArg("straggler: negative timeout %d ms", timeoutMS)
	}
	pol, err := straggler.Preset(policy, s.comm.Size(), int(globalBatch))
	if err != nil {
		return driver.Config{}, badArg("%v", err)
	}
	if flags&flagEqualShares != 0 {
		// A fixed data order (DistributedSampler) cannot take shares: the
		// modes alone remain, and not the exact eviction, which gives the
		// evicted ranks' rows to the members (a fixed order would drop
		// them).
		pol.Shares, pol.Budget, pol.Exclude = false, false, false
	}
	if flags&flagSampled != 0 {
		// A sampler splits each global batch by the plan's shares
		// (rt_straggler_shares): whole samples, no compute budget, and
		// every rank keeps at least one sample of every batch.
		pol.Budget, pol.Exclude = false, false
	}
	return driver.Config{
		Comm: s.recordingComm(), Payload: int(payload), Policy: pol, Probe: flags&flagProbe != 0,
		OpTimeout: time.Duration(timeoutMS) * time.Millisecond, Logger: s.log,
	}, nil
}

// driverError maps the driver's configuration errors to RT_ERR_INVALID and
// keeps every other error (a peer's death, a timeout) as it is.
func driverError(err error) error {
	if errors.Is(err, driver.ErrInvalidConfig) || errors.Is(err, straggler.ErrInvalidConfig) {
		return badArg("%v", err)
	}
	return err
}

//export rt_straggler_open
func rt_straggler_open(h C.rt_comm, payload C.int64_t, policy *C.char, globalBatch C.int64_t, flags C.int,
	timeoutMS C.int64_t, out *C.rt_straggler, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	if out == nil {
		return setError(badArg("rt_straggler_open: out is NULL"), errbuf, errlen)
	}
	if policy == nil {
		return setError(badArg("rt_straggler_open: policy is NULL"), errbuf, errlen)
	}
	s, err := lookup(h)
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	r, err := openStraggler(s, int64(payload), C.GoString(policy), int64(globalBatch), int(flags), int64(timeoutMS))
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	*out = C.rt_straggler(cgo.NewHandle(r))
	return C.RT_OK
}

// openStraggler starts a driver on s's communicator.
func openStraggler(s *session, payload int64, policy string, globalBatch int64, flags int, timeoutMS int64) (*stragglerRun, error) {
	return openStragglerWith(s, payload, policy, globalBatch, flags, timeoutMS, nil)
}

// openStragglerWith starts a driver on s's communicator whose policy
// plans under mem (nil: no memory plan).
func openStragglerWith(s *session, payload int64, policy string, globalBatch int64, flags int, timeoutMS int64,
	mem *straggler.Memory) (*stragglerRun, error) {
	cfg, err := stragglerConfig(s, payload, policy, globalBatch, flags, timeoutMS)
	if err != nil {
		return nil, err
	}
	if mem != nil {
		cfg.Policy.Memory = mem
		s.log.Debug().Str("memory", describeMemory(mem)).Msg("straggler driver plans under device memory")
	}
	d, err := driver.New(s.ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("capi: rt_straggler_open: %w", driverError(err))
	}
	return &stragglerRun{s: s, d: d}, nil
}

//export rt_straggler_set_state
func rt_straggler_set_state(h C.rt_straggler, state *C.float, params, total C.int64_t, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	return setError(withStraggler(h, func(r *stragglerRun) error {
		return r.setState(unsafe.Pointer(state), int64(params), int64(total))
	}), errbuf, errlen)
}

func (r *stragglerRun) setState(p unsafe.Pointer, params, total int64) error {
	switch {
	case r.d == nil:
		return badArg("rt_straggler_set_state: the driver is closed")
	case params < 0 || total < params || total > 1<<40:
		return badArg("rt_straggler_set_state: %d parameters of a state of %d float32s", params, total)
	case total > 0 && p == nil:
		return badArg("rt_straggler_set_state: NULL state of %d float32s", total)
	}
	all := []float32{}
	if total > 0 {
		all = unsafe.Slice((*float32)(p), total)
	}
	// Full slice expressions: the driver's copies never run past a part.
	r.d.SetState(all[:params:params], all[params:total:total])
	r.hasState = true
	return nil
}

//export rt_straggler_step
func rt_straggler_step(h C.rt_straggler, grad *C.float, samples, computeUS, arrivalUS C.int64_t, out *C.rt_straggler_result,
	errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	return setError(withStraggler(h, func(r *stragglerRun) error {
		rep, err := r.step(unsafe.Pointer(grad), int64(samples), int64(computeUS), int64(arrivalUS))
		if err == nil {
			fill(out, rep)
		}
		return err
	}), errbuf, errlen)
}

// step runs one driver Step on the caller's gradient (NULL: zeros) and
// writes the reduced sum back when this rank was a member of the step
// (with no sample applied it is zeros but for what the callers put in the
// payload beyond their gradients: a flag every member must read).
func (r *stragglerRun) step(grad unsafe.Pointer, samples, computeUS, arrivalUS int64) (stepReport, error) {
	if r.d == nil {
		return stepReport{}, badArg("rt_straggler_step: the driver is closed")
	}
	if r.flushed {
		return stepReport{}, badArg("rt_straggler_step: the run was flushed (training is over)")
	}
	if samples < 0 || computeUS < 0 || arrivalUS < 0 {
		return stepReport{}, badArg("rt_straggler_step: negative samples %d, compute %d µs or arrival %d µs", samples, computeUS, arrivalUS)
	}
	if !r.hasState {
		return stepReport{}, badArg("rt_straggler_step: no state registered (call rt_straggler_set_state first)")
	}
	buf := r.d.Buffer()
	var g []float32
	if grad != nil && len(buf) > 0 {
		g = unsafe.Slice((*float32)(grad), len(buf))
		copy(buf, g)
	} else {
		clear(buf)
	}
	in := driver.StepInput{Samples: int(samples), Compute: time.Duration(computeUS) * time.Microsecond,
		Arrival: time.Duration(arrivalUS) * time.Microsecond}
	res, err := r.d.Step(r.s.ctx, in)
	if err != nil {
		return stepReport{}, driverError(err)
	}
	if res.Role != straggler.RoleChild && g != nil {
		copy(g, buf)
	}
	return r.report(res), nil
}

//export rt_straggler_shares
func rt_straggler_shares(h C.rt_straggler, out *C.int64_t, n C.int64_t, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	return setError(withStraggler(h, func(r *stragglerRun) error {
		if r.d == nil {
			return badArg("rt_straggler_shares: the driver is closed")
		}
		shares := r.d.Plan().Shares
		if out == nil || int(n) != len(shares) {
			return badArg("rt_straggler_shares: room for %d shares, the job has %d ranks", int64(n), len(shares))
		}
		dst := unsafe.Slice((*int64)(unsafe.Pointer(out)), len(shares))
		for i, b := range shares {
			dst[i] = int64(b)
		}
		return nil
	}), errbuf, errlen)
}

//export rt_straggler_flush
func rt_straggler_flush(h C.rt_straggler, grad *C.float, out *C.rt_straggler_result, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	return setError(withStraggler(h, func(r *stragglerRun) error {
		rep, err := r.flush(unsafe.Pointer(grad))
		if err == nil {
			fill(out, rep)
		}
		return err
	}), errbuf, errlen)
}

// flush runs the driver's Flush and writes the late gradients' sum (or
// zeros) into the caller's buffer.
func (r *stragglerRun) flush(grad unsafe.Pointer) (stepReport, error) {
	if r.d == nil {
		return stepReport{}, badArg("rt_straggler_flush: the driver is closed")
	}
	buf := r.d.Buffer()
	if grad == nil && len(buf) > 0 {
		return stepReport{}, badArg("rt_straggler_flush: grad is NULL (it receives the late gradients)")
	}
	if !r.hasState {
		return stepReport{}, badArg("rt_straggler_flush: no state registered (call rt_straggler_set_state first)")
	}
	if r.flushed {
		return stepReport{}, badArg("rt_straggler_flush: the run was flushed already")
	}
	r.flushed = true
	res, err := r.d.Flush(r.s.ctx)
	if err != nil {
		return stepReport{}, driverError(err)
	}
	if len(buf) > 0 {
		g := unsafe.Slice((*float32)(grad), len(buf))
		if res.Applied > 0 {
			copy(g, buf)
		} else {
			clear(g)
		}
	}
	return r.report(res), nil
}

// stepReport is rt_straggler_result in Go: what a step or flush did.
type stepReport struct {
	step, applied, next     int
	evicted                 uint64 // bit r: rank r is a child in the next plan
	staleness, wait         float64
	role, mode, folded      int
	replaced, done          bool
	nextRole, nextMode      int
	stalenessBound, lateRnk int
}

// report summarises res (and the driver's next step and role) without
// allocating.
func (r *stragglerRun) report(res driver.Result) stepReport {
	rep := stepReport{step: res.Step, applied: res.Applied, next: r.d.Next(), staleness: res.Staleness,
		wait: res.Wait.Seconds(), role: int(res.Role), mode: int(res.Plan.Mode), folded: res.Folded,
		replaced: res.StateReplaced, done: res.Done, nextRole: int(r.d.Role()), nextMode: int(res.Next.Mode), lateRnk: -1}
	for _, c := range res.Next.Evicted {
		if c < 64 {
			rep.evicted |= 1 << c
		}
	}
	switch res.Next.Mode {
	case straggler.ModeOverlap:
		rep.lateRnk = res.Next.Late
	case straggler.ModeEvict:
		rep.stalenessBound = res.Next.Staleness
	}
	return rep
}

// fill writes rep into the caller's result, when not NULL.
func fill(out *C.rt_straggler_result, rep stepReport) {
	if out == nil {
		return
	}
	*out = C.rt_straggler_result{
		step: C.int64_t(rep.step), applied: C.int64_t(rep.applied), next_step: C.int64_t(rep.next),
		evicted: C.uint64_t(rep.evicted), staleness: C.double(rep.staleness), wait_s: C.double(rep.wait),
		role: C.int32_t(rep.role), mode: C.int32_t(rep.mode), folded: C.int32_t(rep.folded),
		replaced: b32(rep.replaced), done: b32(rep.done), next_role: C.int32_t(rep.nextRole),
		next_mode: C.int32_t(rep.nextMode), staleness_bound: C.int32_t(rep.stalenessBound), late: C.int32_t(rep.lateRnk),
	}
}

func b32(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

//export rt_straggler_close
func rt_straggler_close(h C.rt_straggler, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	return setError(withStraggler(h, func(r *stragglerRun) error {
		cgo.Handle(h).Delete()
		r.d = nil
		return nil
	}), errbuf, errlen)
}

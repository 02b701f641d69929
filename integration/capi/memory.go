package main

/*
#include <stdint.h>
#include "include/ringtail.h"
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"

	"github.com/ringtail-ml/ringtail/balance"
	"github.com/ringtail-ml/ringtail/internal/settings"
	"github.com/ringtail-ml/ringtail/straggler"
)

// This file holds the memory half of AntDT-DD on the C ABI: a driver whose
// shares policy is bounded by every rank's micro-batch cap
// (straggler.Memory), a device's cap from its free memory
// (balance.MaxBatchFromMemory) and a share's split into micro-batches
// (balance.SplitShare). The PyTorch hook plans and splits through these
// calls; no part of the plan is re-implemented outside Go.

//export rt_straggler_open_memory
func rt_straggler_open_memory(h C.rt_comm, payload C.int64_t, policy *C.char, globalBatch C.int64_t, flags C.int,
	timeoutMS C.int64_t, microCaps *C.int64_t, n C.int64_t, maxAccum C.int64_t, out *C.rt_straggler,
	errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	if out == nil || policy == nil {
		return setError(badArg("rt_straggler_open_memory: out or policy is NULL"), errbuf, errlen)
	}
	if n < 0 || n > 1<<24 || (n > 0 && microCaps == nil) {
		return setError(badArg("rt_straggler_open_memory: %d micro-batch caps at %p", int64(n), microCaps), errbuf, errlen)
	}
	s, err := lookup(h)
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	var caps []int64
	if n > 0 {
		caps = unsafe.Slice((*int64)(unsafe.Pointer(microCaps)), int(n))
	}
	r, err := openStragglerMemory(s, int64(payload), C.GoString(policy), int64(globalBatch), int(flags), int64(timeoutMS),
		caps, int64(maxAccum))
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	*out = C.rt_straggler(cgo.NewHandle(r))
	return C.RT_OK
}

// memoryPlan checks every rank's micro-batch cap (one per rank, ≥ 0: 0 is
// unbounded) and the accumulation bound, and returns the policy's
// straggler.Memory.
func memoryPlan(world int, caps []int64, maxAccum int64) (*straggler.Memory, error) {
	if len(caps) != world {
		return nil, badArg("straggler: %d micro-batch caps for %d ranks", len(caps), world)
	}
	if maxAccum < 0 || maxAccum > 1<<20 {
		return nil, badArg("straggler: max accumulation %d outside 0..2^20 (0: %d)", maxAccum, straggler.DefaultMaxAccum)
	}
	m := &straggler.Memory{MicroCap: make([]int, world), MaxAccum: int(maxAccum)}
	for r, c := range caps {
		if c < 0 || c > 1<<31 {
			return nil, badArg("straggler: rank %d's micro-batch cap %d outside 0..2^31", r, c)
		}
		m.MicroCap[r] = int(c)
	}
	return m, nil
}

// openStragglerMemory starts a driver whose shares policy plans each
// rank's share within maxAccum micro-batches of its cap (AntDT-DD's
// Eq. 4, straggler.Memory): every rank must pass the same caps.
func openStragglerMemory(s *session, payload int64, policy string, globalBatch int64, flags int, timeoutMS int64,
	caps []int64, maxAccum int64) (*stragglerRun, error) {
	mem, err := memoryPlan(s.comm.Size(), caps, maxAccum)
	if err != nil {
		return nil, err
	}
	return openStragglerWith(s, payload, policy, globalBatch, flags, timeoutMS, mem)
}

//export rt_micro_cap
func rt_micro_cap(freeBytes, sampleBytes C.int64_t, out *C.int64_t, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	if out == nil {
		return setError(badArg("rt_micro_cap: out is NULL"), errbuf, errlen)
	}
	b, err := microCap(int64(freeBytes), int64(sampleBytes))
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	*out = C.int64_t(b)
	return C.RT_OK
}

// microCap is the largest micro-batch in freeBytes at sampleBytes a
// sample (balance.MaxBatchFromMemory).
func microCap(freeBytes, sampleBytes int64) (int, error) {
	b, err := balance.MaxBatchFromMemory(freeBytes, sampleBytes)
	if err != nil {
		return 0, badArg("rt_micro_cap: %v", err)
	}
	return b, nil
}

//export rt_micro_split
func rt_micro_split(rows, limit C.int64_t, sizes *C.int64_t, room C.int64_t, count *C.int64_t, errbuf *C.char,
	errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	if count == nil || room < 0 || (room > 0 && sizes == nil) {
		return setError(badArg("rt_micro_split: count NULL or room for %d sizes at %p", int64(room), sizes), errbuf, errlen)
	}
	var dst []int64
	if room > 0 {
		dst = unsafe.Slice((*int64)(unsafe.Pointer(sizes)), int(room))
	}
	n, err := microSplit(int64(rows), int64(limit), dst)
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	*count = C.int64_t(n)
	return C.RT_OK
}

// microSplit writes the micro-batches of a share of rows under limit
// (balance.SplitShare: the fewest near-equal ones, none above limit; limit
// 0: one) into dst and returns their count.
func microSplit(rows, limit int64, dst []int64) (int, error) {
	if rows < 0 || rows > 1<<31 || limit < 0 || limit > 1<<31 {
		return 0, badArg("rt_micro_split: %d rows under a cap of %d (each 0..2^31)", rows, limit)
	}
	m := balance.SplitShare(int(rows), int(limit))
	if m.Accum > len(dst) {
		return 0, badArg("rt_micro_split: %d rows in micro-batches of ≤ %d make %d, room for %d", rows, limit, m.Accum, len(dst))
	}
	for i, b := range m.Sizes() {
		dst[i] = int64(b)
	}
	return m.Accum, nil
}

//export rt_parse_size
func rt_parse_size(spec *C.char, rank, world C.int64_t, out *C.int64_t, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	if spec == nil || out == nil {
		return setError(badArg("rt_parse_size: spec or out is NULL"), errbuf, errlen)
	}
	b, err := parseSize(C.GoString(spec), int64(rank), int64(world))
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	*out = C.int64_t(b)
	return C.RT_OK
}

// parseSize is rank's size of a size setting (settings.RankBytes: one
// size, or one per rank comma-separated; 0 when empty), as ringtail-train
// reads RINGTAIL_MEM_CAP and RINGTAIL_SAMPLE_BYTES.
func parseSize(spec string, rank, world int64) (int64, error) {
	if world < 1 || world > 1<<24 || rank < 0 || rank >= world {
		return 0, badArg("rt_parse_size: rank %d of a world of %d", rank, world)
	}
	b, err := settings.RankBytes(spec, int(rank), int(world))
	if err != nil {
		return 0, badArg("rt_parse_size: %v", err)
	}
	return b, nil
}

// describeMemory is the memory plan's line for the driver's logs.
func describeMemory(m *straggler.Memory) string {
	if m == nil {
		return "no memory plan"
	}
	return fmt.Sprintf("micro-batch caps %v, ≤ %d passes", m.MicroCap, m.MaxAccum)
}

package main

/*
#include <stdlib.h>
#include <string.h>
#include "include/ringtail.h"

static void rt_copy_error(char* dst, size_t n, const char* src, size_t len) {
	if (dst == NULL || n == 0) return;
	if (len > n - 1) len = n - 1;
	memcpy(dst, src, len);
	dst[len] = 0;
}
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"
)

// main is required by -buildmode=c-shared and never runs.
func main() {}

// setError writes err's message into the caller's buffer and returns its
// code.
func setError(err error, buf *C.char, n C.size_t) C.int {
	if err == nil {
		return C.RT_OK
	}
	msg := err.Error()
	if len(msg) > 0 && buf != nil && n > 0 {
		cs := C.CString(msg)
		C.rt_copy_error(buf, n, cs, C.size_t(len(msg)))
		C.free(unsafe.Pointer(cs))
	}
	return C.int(code(err))
}

// guard turns a panic (an invalid handle, say) into RT_ERR_INVALID.
func guard(rc *C.int, buf *C.char, n C.size_t) {
	if r := recover(); r != nil {
		*rc = setError(badArg("%v", r), buf, n)
	}
}

// lookup returns the session of handle h.
func lookup(h C.rt_comm) (s *session, err error) {
	if h == 0 {
		return nil, badArg("handle 0 is not a communicator")
	}
	defer func() {
		if r := recover(); r != nil {
			err = badArg("handle %d is not a live communicator (finalized?)", uint64(h))
		}
	}()
	s, ok := cgo.Handle(h).Value().(*session)
	if !ok {
		return nil, badArg("handle %d is not a communicator", uint64(h))
	}
	return s, nil
}

//export rt_abi_version
func rt_abi_version() C.int { return abiVersion }

//export rt_init
func rt_init(overrides *C.char, out *C.rt_comm, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	if out == nil {
		return setError(badArg("rt_init: comm is NULL"), errbuf, errlen)
	}
	var ov string
	if overrides != nil {
		ov = C.GoString(overrides)
	}
	s, err := open(ov)
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	*out = C.rt_comm(cgo.NewHandle(s))
	return C.RT_OK
}

//export rt_info
func rt_info(h C.rt_comm, rank, world *C.int, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	if rank != nil {
		*rank = C.int(s.comm.Rank())
	}
	if world != nil {
		*world = C.int(s.comm.Size())
	}
	return C.RT_OK
}

//export rt_allreduce
func rt_allreduce(h C.rt_comm, buf unsafe.Pointer, count C.int64_t, dtype, op C.int, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err == nil {
		err = s.allReduce(buf, int64(count), int(dtype), int(op))
	}
	return setError(err, errbuf, errlen)
}

//export rt_broadcast
func rt_broadcast(h C.rt_comm, buf unsafe.Pointer, count C.int64_t, dtype, root C.int, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err == nil {
		err = s.broadcast(buf, int64(count), int(dtype), int(root))
	}
	return setError(err, errbuf, errlen)
}

//export rt_allgather
func rt_allgather(h C.rt_comm, send, recv unsafe.Pointer, count C.int64_t, dtype C.int, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err == nil {
		err = s.allGather(send, recv, int64(count), int(dtype))
	}
	return setError(err, errbuf, errlen)
}

//export rt_reduce_scatter
func rt_reduce_scatter(h C.rt_comm, send, recv unsafe.Pointer, recvCount C.int64_t, dtype, op C.int, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err == nil {
		err = s.reduceScatter(send, recv, int64(recvCount), int(dtype), int(op))
	}
	return setError(err, errbuf, errlen)
}

//export rt_barrier
func rt_barrier(h C.rt_comm, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err == nil {
		err = s.barrier()
	}
	return setError(err, errbuf, errlen)
}

//export rt_call_site
func rt_call_site(h C.rt_comm, site *C.char, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err == nil {
		name := ""
		if site != nil {
			name = C.GoString(site)
		}
		s.setSite(name)
	}
	return setError(err, errbuf, errlen)
}

//export rt_abort
func rt_abort(h C.rt_comm) (rc C.int) {
	defer guard(&rc, nil, 0)
	s, err := lookup(h)
	if err != nil {
		return C.int(code(err))
	}
	s.abort()
	return C.RT_OK
}

//export rt_finalize
func rt_finalize(h C.rt_comm, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	cgo.Handle(h).Delete()
	if err := s.close(); err != nil {
		return setError(fmt.Errorf("capi: finalize: %w", err), errbuf, errlen)
	}
	return C.RT_OK
}

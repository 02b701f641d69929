//go:build cgo

// Command capi is ringtail's C ABI: built with
//
//	go build -buildmode=c-shared -o libringtail.so ./integration/capi
//
// it is a shared library exporting the functions declared in
// include/ringtail.h (rt_init, rt_allreduce, rt_broadcast, rt_allgather,
// rt_reduce_scatter, rt_alltoall(v), rt_barrier, rt_monitored_barrier,
// rt_isend/rt_irecv/rt_wait/rt_test/rt_cancel, rt_abort, rt_finalize,
// ...), for C, C++ and Python (ctypes) callers such as the ringtail_torch
// PyTorch backend.
//
// The library carries the NVML binding of the default build (package
// nvml, through github.com/NVIDIA/go-nvml): its nvml* symbols stay
// undefined in libringtail.so and resolve when go-nvml dlopens
// libnvidia-ml.so.1 with RTLD_GLOBAL at NVML's Init. A caller therefore
// loads the library with lazy binding (dlopen RTLD_LAZY, as ringtail_torch
// does; a C program links with -Wl,--allow-shlib-undefined), and on a host
// without the driver none of them is ever called. -tags ringtail_nonvml
// builds the library without NVML and without undefined symbols.
//
// It owns:
//   - the translation of C arguments (raw pointers, element counts, dtype
//     and op codes) into ringtail Buffers, with every argument checked
//     before anything is sent;
//   - communicator and request handles (runtime/cgo.Handle values), so no
//     Go pointer ever reaches C; each session owns a ringtail.Mailbox for
//     the tagged point-to-point requests (p2p.go);
//   - the environment overrides of rt_init (overrides.go): the Go runtime
//     reads the process environment once, when the library loads, so a
//     caller that learns a value later (a port agreed through a PyTorch
//     store, say) passes it as NAME=VALUE lines instead;
//   - the straggler driver on flat float32 buffers (straggler.go:
//     rt_straggler_open/set_state/step/flush/close), so that a training
//     loop outside Go (ringtail_torch's DDP hook) runs eviction and the
//     exact mode with every decision made in Go;
//   - the mapping of *ringtail.Error kinds to RT_ERR_* codes and messages.
//     A panic inside an exported function (an invalid handle, say) becomes
//     RT_ERR_INVALID and a message, never a crash.
//
// Every exported function may be called from any thread: cgo gives each
// calling thread what it needs, the communicator serialises collectives,
// and rt_abort cancels the context of the operation in flight.
//
// The package holds no package-level mutable state: each handle owns its
// communicator and its cancel function.
//
// This package must never import internal/launch nor the policy packages
// (balance, gradcode, topology, elastic), except straggler and
// straggler/driver for the rt_straggler_* calls: it exposes the
// communicator and the straggler driver, and decides nothing itself.
package main

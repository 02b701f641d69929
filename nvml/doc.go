// Package nvml owns ringtail's hardware telemetry: what a rank can say about
// the device it trains on and the host it runs on.
//
// It owns:
//
//   - the Telemetry and Device interfaces the rest of ringtail reads GPUs
//     through, and the plain-data Sample they return (name and model, memory
//     total/used/free, SM clock, GPU and memory utilisation, PCIe rx/tx
//     throughput, power), plus Fake, an in-memory twin for tests;
//   - the real binding to NVIDIA's NVML through github.com/NVIDIA/go-nvml,
//     compiled in the default build (cgo on; see binding.go). go-nvml
//     loads libnvidia-ml.so.1 with dlopen at the first call, so building
//     needs no NVIDIA library and a host without one runs without GPU
//     telemetry. The build tag ringtail_nonvml, or CGO_ENABLED=0, selects
//     the stub instead: Open returns a Telemetry whose every call fails
//     with ErrNoNVML ("NVML not compiled in"), and the package and
//     everything importing it build as pure Go;
//   - Inspect and Reason: what NVML finds (driver, devices) or in a few
//     words why there is none, for `ringtail info` and the one log line a
//     host without a GPU gets;
//   - the no-GPU fallback: HostReader differences /proc/stat and
//     /proc/net/dev to give host CPU utilisation and network rx/tx rates. The
//     parsers (ParseProcStat, ParseNetDev) and the differencing (CPUBusy,
//     NetRates) are pure functions; the reader gets its clock and its /proc
//     file system injected;
//   - the throughput prior table (PriorThroughput, NormalizeModel) that
//     ranks devices by model until measured step times exist.
//
// The binding remembers a failed NVML initialisation and never calls NVML
// again afterwards (doing so can kill the process); it shuts NVML down at
// most once.
//
// Samples reach the straggler controller only as observations built by the
// caller. This package is a leaf: it must never import the decision packages
// (straggler, balance, topology, ring, tree, gradcode), the transport, net,
// or logging. Nothing here starts goroutines.
package nvml

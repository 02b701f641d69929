//go:build cgo && !ringtail_nonvml

package nvml

import (
	"encoding/binary"
	"fmt"
	"sync"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// BuildTag is the build tag that leaves the real NVML binding out: the
// binding is compiled whenever cgo is on (the default build), unless
// go build -tags ringtail_nonvml (or CGO_ENABLED=0) selects the stub.
const BuildTag = "ringtail_nonvml"

// Compiled reports whether this build contains the real NVML binding.
const Compiled = true

// bindingState is the lifecycle of a Binding. Transitions:
// fresh → ready (Init succeeded) → closed (Shutdown called once);
// fresh → failed (Init failed; NVML is never called again) → closed;
// fresh → closed (closed before first use; NVML never loaded).
type bindingState int

const (
	stateFresh bindingState = iota
	stateReady
	stateFailed
	stateClosed
)

// Binding is the Telemetry backed by NVML through go-nvml. The shared
// library is loaded (dlopen) and initialised on first use, not by Open.
//
// A failed initialisation is remembered: every later call returns the same
// error, wrapping ErrNoNVML, without calling NVML again (go-nvml calls into
// an unloaded library crash the process). NVML's Shutdown is called exactly
// once, by the first Close after a successful initialisation. Close waits
// for calls in flight; calls after Close fail with ErrClosed.
type Binding struct {
	lib gonvml.Interface
	// libName is the library Init loads, for the reason a failed Init
	// gives ("libnvidia-ml.so.1 not found").
	libName string

	// mu guards state and initErr. NVML calls run under the read lock, so
	// Close (write lock) cannot shut NVML down beneath them.
	mu      sync.RWMutex
	state   bindingState
	initErr error
	// syms says which optional entry points the loaded library exports,
	// probed once after Init (under the write lock) and read-only after:
	// calling a symbol the driver lacks would kill the process.
	syms symbols
}

// symbols records the optional NVML entry points of the loaded library.
type symbols struct {
	// eventReasons: nvmlDeviceGetCurrentClocksEventReasons (drivers from
	// R535); older ones only have the throttle-reasons name.
	eventReasons, throttleReasons bool
	// fieldValues: nvmlDeviceGetFieldValues (NVLink counters).
	fieldValues bool
}

// probeSymbols asks the loaded library which optional entry points it has.
func probeSymbols(lib gonvml.Interface) symbols {
	ext := lib.Extensions()
	has := func(name string) bool { return ext.LookupSymbol(name) == nil }
	return symbols{
		eventReasons:    has("nvmlDeviceGetCurrentClocksEventReasons"),
		throttleReasons: has("nvmlDeviceGetCurrentClocksThrottleReasons"),
		fieldValues:     has("nvmlDeviceGetFieldValues"),
	}
}

var _ Telemetry = (*Binding)(nil)

// Open returns the NVML-backed Telemetry. It validates cfg but does not
// touch NVML: the first method call loads and initialises the library, and
// reports ErrNoNVML if that fails.
func Open(cfg Config) (Telemetry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("nvml: open: %w", err)
	}
	var opts []gonvml.LibraryOption
	if cfg.LibraryPath != "" {
		opts = append(opts, gonvml.WithLibraryPath(cfg.LibraryPath))
	}
	return OpenLibrary(gonvml.New(opts...), cfg)
}

// OpenLibrary is Open over a given go-nvml Interface, such as one from
// github.com/NVIDIA/go-nvml/pkg/nvml/mock. cfg.LibraryPath is ignored: lib
// decides what it loads.
func OpenLibrary(lib gonvml.Interface, cfg Config) (*Binding, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("nvml: open: %w", err)
	}
	if lib == nil {
		return nil, fmt.Errorf("nvml: open: %w: nil library", ErrInvalidConfig)
	}
	name := cfg.LibraryPath
	if name == "" {
		name = defaultLibrary
	}
	return &Binding{lib: lib, libName: name}, nil
}

// defaultLibrary is the NVML library go-nvml loads when Config.LibraryPath
// is empty.
const defaultLibrary = "libnvidia-ml.so.1"

// acquire returns with b.mu read-locked and NVML initialised, or with an
// error and no lock held. It initialises NVML on first use.
func (b *Binding) acquire() error {
	for {
		b.mu.RLock()
		switch b.state {
		case stateReady:
			return nil
		case stateFailed:
			err := b.initErr
			b.mu.RUnlock()
			return err
		case stateClosed:
			b.mu.RUnlock()
			return ErrClosed
		}
		b.mu.RUnlock()

		b.mu.Lock()
		if b.state == stateFresh {
			if ret := b.lib.Init(); ret != gonvml.SUCCESS {
				b.state = stateFailed
				b.initErr = &OpError{Op: "Init", Device: -1, Code: int(ret), Text: initText(ret, b.libName), kind: ErrNoNVML}
			} else {
				b.state = stateReady
				b.syms = probeSymbols(b.lib)
			}
		}
		b.mu.Unlock()
		// Loop: take the read lock and look at the state again, which
		// Close may have changed in between.
	}
}

// DeviceCount implements Telemetry.
func (b *Binding) DeviceCount() (int, error) {
	if err := b.acquire(); err != nil {
		return 0, err
	}
	defer b.mu.RUnlock()
	n, ret := b.lib.DeviceGetCount()
	if err := opErr("DeviceGetCount", -1, ret); err != nil {
		return 0, err
	}
	return n, nil
}

// Device implements Telemetry. It resolves the NVML handle and the device's
// name once; the returned Device reads fresh values on every Sample.
func (b *Binding) Device(index int) (Device, error) {
	if err := b.acquire(); err != nil {
		return nil, err
	}
	defer b.mu.RUnlock()
	n, ret := b.lib.DeviceGetCount()
	if err := opErr("DeviceGetCount", -1, ret); err != nil {
		return nil, err
	}
	if index < 0 || index >= n {
		return nil, fmt.Errorf("nvml: device %d of %d: %w", index, n, ErrNoDevice)
	}
	h, ret := b.lib.DeviceGetHandleByIndex(index)
	if err := opErr("DeviceGetHandleByIndex", index, ret); err != nil {
		return nil, err
	}
	name, ret := h.GetName()
	if err := opErr("DeviceGetName", index, ret); err != nil {
		return nil, err
	}
	return &gpu{b: b, index: index, h: h, name: name}, nil
}

// DriverVersion implements DriverVersioner: the NVIDIA driver's version,
// e.g. "550.54.15".
func (b *Binding) DriverVersion() (string, error) {
	if err := b.acquire(); err != nil {
		return "", err
	}
	defer b.mu.RUnlock()
	v, ret := b.lib.SystemGetDriverVersion()
	if err := opErr("SystemGetDriverVersion", -1, ret); err != nil {
		return "", err
	}
	return v, nil
}

// Close implements Telemetry. It calls NVML's Shutdown if and only if this
// Binding initialised NVML successfully and has not shut it down yet. An
// error from Shutdown is returned, but the Binding is closed regardless and
// never calls Shutdown again.
func (b *Binding) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	prev := b.state
	b.state = stateClosed
	if prev != stateReady {
		return nil
	}
	return opErr("Shutdown", -1, b.lib.Shutdown())
}

// gpu is one device of a Binding.
type gpu struct {
	b     *Binding
	index int
	h     gonvml.Device
	name  string
}

var _ Device = (*gpu)(nil)

// Index implements Device.
func (g *gpu) Index() int { return g.index }

// Name implements Device. The name is read once, when the Device is made,
// but Name still fails after Close so that a closed Telemetry looks closed.
func (g *gpu) Name() (string, error) {
	if err := g.b.acquire(); err != nil {
		return "", err
	}
	g.b.mu.RUnlock()
	return g.name, nil
}

// Sample implements Device. A field the device does not support is flagged
// in Sample.Unsupported; any other failure fails the whole sample.
func (g *gpu) Sample() (Sample, error) {
	if err := g.b.acquire(); err != nil {
		return Sample{}, err
	}
	defer g.b.mu.RUnlock()

	s := Sample{Index: g.index, Name: g.name, Model: NormalizeModel(g.name)}
	var err error
	field := func(op string, f Field, ret gonvml.Return) bool {
		if err != nil {
			return false
		}
		if unsupported(ret) {
			s.Unsupported = s.Unsupported.With(f)
			return false
		}
		err = opErr(op, g.index, ret)
		return err == nil
	}

	uuid, ret := g.h.GetUUID()
	if field("DeviceGetUUID", FieldUUID, ret) {
		s.UUID = uuid
	}
	mem, ret := g.h.GetMemoryInfo()
	if field("DeviceGetMemoryInfo", FieldMemory, ret) {
		s.MemoryTotalBytes, s.MemoryUsedBytes, s.MemoryFreeBytes = mem.Total, mem.Used, mem.Free
	}
	clk, ret := g.h.GetClockInfo(gonvml.CLOCK_SM)
	if field("DeviceGetClockInfo", FieldSMClock, ret) {
		s.SMClockMHz = clk
	}
	util, ret := g.h.GetUtilizationRates()
	if field("DeviceGetUtilizationRates", FieldUtilization, ret) {
		s.GPUUtilPercent, s.MemoryUtilPercent = util.Gpu, util.Memory
	}
	rx, ret := g.h.GetPcieThroughput(gonvml.PCIE_UTIL_RX_BYTES)
	if field("DeviceGetPcieThroughput(rx)", FieldPCIeRx, ret) {
		s.PCIeRxKBps = rx
	}
	tx, ret := g.h.GetPcieThroughput(gonvml.PCIE_UTIL_TX_BYTES)
	if field("DeviceGetPcieThroughput(tx)", FieldPCIeTx, ret) {
		s.PCIeTxKBps = tx
	}
	pw, ret := g.h.GetPowerUsage()
	if field("DeviceGetPowerUsage", FieldPower, ret) {
		s.PowerMilliwatts = pw
	}
	switch {
	case g.b.syms.eventReasons:
		r, ret := g.h.GetCurrentClocksEventReasons()
		if field("DeviceGetCurrentClocksEventReasons", FieldClockReasons, ret) {
			s.ClockReasons = ClockReasons(r)
		}
	case g.b.syms.throttleReasons:
		r, ret := g.h.GetCurrentClocksThrottleReasons()
		if field("DeviceGetCurrentClocksThrottleReasons", FieldClockReasons, ret) {
			s.ClockReasons = ClockReasons(r)
		}
	default:
		s.Unsupported = s.Unsupported.With(FieldClockReasons)
	}
	if g.b.syms.fieldValues && err == nil {
		rx, tx, ok, ferr := g.nvlink()
		switch {
		case ferr != nil:
			err = ferr
		case ok:
			s.NVLinkRxKiB, s.NVLinkTxKiB = rx, tx
		default:
			s.Unsupported = s.Unsupported.With(FieldNVLink)
		}
	} else {
		s.Unsupported = s.Unsupported.With(FieldNVLink)
	}
	if err != nil {
		return Sample{}, err
	}
	return s, nil
}

// allLinks is the NVML field-value scope that sums a counter over every
// NVLink (UINT_MAX).
const allLinks = ^uint32(0)

// nvlink reads the data counters of all NVLinks, in KiB. ok is false when
// the device has no NVLink or the driver does not know the counters (a
// per-field failure); err is set only when the call as a whole fails.
func (g *gpu) nvlink() (rx, tx uint64, ok bool, err error) {
	vals := []gonvml.FieldValue{
		{FieldId: gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ScopeId: allLinks},
		{FieldId: gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: allLinks},
	}
	ret := g.h.GetFieldValues(vals)
	if unsupported(ret) {
		return 0, 0, false, nil
	}
	if err := opErr("DeviceGetFieldValues(nvlink)", g.index, ret); err != nil {
		return 0, 0, false, err
	}
	out := [2]uint64{}
	for i, v := range vals {
		n, good := fieldUint(v)
		if !good {
			return 0, 0, false, nil
		}
		out[i] = n
	}
	return out[0], out[1], true, nil
}

// fieldUint decodes an unsigned field value, or reports false for a failed
// or non-integer one.
func fieldUint(v gonvml.FieldValue) (uint64, bool) {
	if gonvml.Return(v.NvmlReturn) != gonvml.SUCCESS {
		return 0, false
	}
	switch gonvml.ValueType(v.ValueType) {
	case gonvml.VALUE_TYPE_UNSIGNED_LONG_LONG, gonvml.VALUE_TYPE_UNSIGNED_LONG:
		return binary.LittleEndian.Uint64(v.Value[:]), true
	case gonvml.VALUE_TYPE_UNSIGNED_INT:
		return uint64(binary.LittleEndian.Uint32(v.Value[:4])), true
	}
	return 0, false
}

// unsupported reports whether ret means "this device cannot report that
// field" rather than a failure.
func unsupported(ret gonvml.Return) bool {
	return ret == gonvml.ERROR_NOT_SUPPORTED || ret == gonvml.ERROR_NO_PERMISSION
}

// opErr converts a failed NVML return into an *OpError, or nil on success.
// It is only called while NVML is initialised, so asking go-nvml for the
// error text is safe.
func opErr(op string, device int, ret gonvml.Return) error {
	if ret == gonvml.SUCCESS {
		return nil
	}
	e := &OpError{Op: op, Device: device, Code: int(ret), Text: ret.Error()}
	if ret == gonvml.ERROR_GPU_IS_LOST {
		e.kind = ErrGPULost
	}
	return e
}

// initText describes a failed Init of library lib without calling into
// NVML (after a failed Init nothing in NVML may be called, nvmlErrorString
// included).
func initText(ret gonvml.Return, lib string) string {
	switch ret {
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		return "no NVIDIA driver (" + lib + " not found)"
	case gonvml.ERROR_DRIVER_NOT_LOADED:
		return "NVIDIA driver not loaded"
	case gonvml.ERROR_NO_PERMISSION:
		return "no permission to talk to the driver"
	case gonvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "NVML library and kernel driver versions differ"
	case gonvml.ERROR_FUNCTION_NOT_FOUND:
		return "NVML symbol not found in the library"
	case gonvml.ERROR_UNINITIALIZED:
		return "NVML not initialised"
	default:
		return "NVML initialisation failed"
	}
}

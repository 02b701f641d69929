//go:build cgo && !ringtail_nonvml

package nvml

import (
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// h100 returns a mocked H100 whose every query succeeds. Each call
// increments calls; if shut is set when a call arrives (NVML already shut
// down), the call is recorded in late.
func h100(index int, calls, late *atomic.Int64, shut *atomic.Bool) *mock.Device {
	touch := func() {
		calls.Add(1)
		if shut.Load() {
			late.Add(1)
		}
	}
	return &mock.Device{
		GetNameFunc: func() (string, gonvml.Return) { touch(); return "NVIDIA H100 80GB HBM3", gonvml.SUCCESS },
		GetUUIDFunc: func() (string, gonvml.Return) {
			touch()
			return "GPU-0000000" + string(rune('0'+index)), gonvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (gonvml.Memory, gonvml.Return) {
			touch()
			return gonvml.Memory{Total: 80 << 30, Used: 20 << 30, Free: 60 << 30}, gonvml.SUCCESS
		},
		GetClockInfoFunc: func(ct gonvml.ClockType) (uint32, gonvml.Return) {
			touch()
			if ct != gonvml.CLOCK_SM {
				return 0, gonvml.ERROR_INVALID_ARGUMENT
			}
			return 1980, gonvml.SUCCESS
		},
		GetUtilizationRatesFunc: func() (gonvml.Utilization, gonvml.Return) {
			touch()
			return gonvml.Utilization{Gpu: 97, Memory: 41}, gonvml.SUCCESS
		},
		GetPcieThroughputFunc: func(c gonvml.PcieUtilCounter) (uint32, gonvml.Return) {
			touch()
			if c == gonvml.PCIE_UTIL_RX_BYTES {
				return 1200, gonvml.SUCCESS
			}
			return 3400, gonvml.SUCCESS
		},
		GetPowerUsageFunc: func() (uint32, gonvml.Return) { touch(); return 612000, gonvml.SUCCESS },
		GetCurrentClocksEventReasonsFunc: func() (uint64, gonvml.Return) {
			touch()
			return gonvml.ClocksEventReasonSwPowerCap | gonvml.ClocksThrottleReasonHwThermalSlowdown, gonvml.SUCCESS
		},
		GetFieldValuesFunc: func(vals []gonvml.FieldValue) gonvml.Return {
			touch()
			for i := range vals {
				if vals[i].ScopeId != allLinks {
					vals[i].NvmlReturn = uint32(gonvml.ERROR_INVALID_ARGUMENT)
					continue
				}
				var n uint64
				switch vals[i].FieldId {
				case gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
					n = 5 << 20
				case gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
					n = 7 << 20
				default:
					vals[i].NvmlReturn = uint32(gonvml.ERROR_INVALID_ARGUMENT)
					continue
				}
				vals[i].ValueType = uint32(gonvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				binary.LittleEndian.PutUint64(vals[i].Value[:], n)
			}
			return gonvml.SUCCESS
		},
	}
}

// allSymbols is a loaded library that exports every optional entry point.
func allSymbols() gonvml.ExtendedInterface {
	return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
}

// symbolsExcept is a loaded library that lacks the named entry points.
func symbolsExcept(missing ...string) gonvml.ExtendedInterface {
	return &mock.ExtendedInterface{LookupSymbolFunc: func(name string) error {
		if slices.Contains(missing, name) {
			return errors.New("undefined symbol: " + name)
		}
		return nil
	}}
}

// fakeNVML is a mocked NVML with n H100s that counts calls.
type fakeNVML struct {
	lib         *mock.Interface
	devs        []*mock.Device
	calls, late atomic.Int64
	shut        atomic.Bool
}

func newFakeNVML(n int) *fakeNVML {
	f := &fakeNVML{}
	for i := 0; i < n; i++ {
		f.devs = append(f.devs, h100(i, &f.calls, &f.late, &f.shut))
	}
	f.lib = &mock.Interface{
		InitFunc:       func() gonvml.Return { return gonvml.SUCCESS },
		ExtensionsFunc: allSymbols,
		ShutdownFunc:   func() gonvml.Return { f.shut.Store(true); return gonvml.SUCCESS },
		DeviceGetCountFunc: func() (int, gonvml.Return) {
			if f.shut.Load() {
				f.late.Add(1)
			}
			return len(f.devs), gonvml.SUCCESS
		},
		DeviceGetHandleByIndexFunc: func(i int) (gonvml.Device, gonvml.Return) {
			if i < 0 || i >= len(f.devs) {
				return nil, gonvml.ERROR_INVALID_ARGUMENT
			}
			return f.devs[i], gonvml.SUCCESS
		},
	}
	return f
}

func openMock(t *testing.T, lib gonvml.Interface) *Binding {
	t.Helper()
	b, err := OpenLibrary(lib, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBinding_SamplesEveryField(t *testing.T) {
	f := newFakeNVML(2)
	b := openMock(t, f.lib)
	defer b.Close()

	got, err := SampleAll(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d samples, want 2", len(got))
	}
	want := Sample{
		Index: 1, UUID: "GPU-00000001", Name: "NVIDIA H100 80GB HBM3", Model: "H100",
		MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 20 << 30, MemoryFreeBytes: 60 << 30,
		SMClockMHz: 1980, GPUUtilPercent: 97, MemoryUtilPercent: 41,
		PCIeRxKBps: 1200, PCIeTxKBps: 3400, PowerMilliwatts: 612000,
		ClockReasons: ClockSWPowerCap | ClockHWThermal,
		NVLinkRxKiB:  5 << 20, NVLinkTxKiB: 7 << 20,
	}
	if got[1] != want {
		t.Fatalf("device 1:\n got %+v\nwant %+v", got[1], want)
	}
	if got[0].Index != 0 || got[0].UUID != "GPU-00000000" {
		t.Fatalf("device 0: %+v", got[0])
	}
}

func TestBinding_LoadsNVMLLazilyAndInitialisesOnce(t *testing.T) {
	f := newFakeNVML(1)
	b := openMock(t, f.lib)
	if n := len(f.lib.InitCalls()); n != 0 {
		t.Fatalf("Open called Init %d times; it must not touch NVML", n)
	}
	for i := 0; i < 3; i++ {
		if n, err := b.DeviceCount(); err != nil || n != 1 {
			t.Fatalf("DeviceCount = %d, %v", n, err)
		}
	}
	if n := len(f.lib.InitCalls()); n != 1 {
		t.Fatalf("Init called %d times, want 1", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// The scenario the wrapper exists for: NVML fails to initialise (no
// driver). Calling anything else in go-nvml afterwards can crash the
// process. The mock leaves every other function nil, so any such call
// panics and fails the test.
func TestBinding_FailedInitIsRememberedAndNVMLIsNeverCalledAgain(t *testing.T) {
	for _, ret := range []gonvml.Return{gonvml.ERROR_LIBRARY_NOT_FOUND, gonvml.ERROR_DRIVER_NOT_LOADED, gonvml.ERROR_LIB_RM_VERSION_MISMATCH} {
		lib := &mock.Interface{InitFunc: func() gonvml.Return { return ret }}
		b := openMock(t, lib)

		_, err := b.DeviceCount()
		if !errors.Is(err, ErrNoNVML) {
			t.Fatalf("%d: DeviceCount err = %v, want ErrNoNVML", ret, err)
		}
		var op *OpError
		if !errors.As(err, &op) || op.Op != "Init" || op.Code != int(ret) {
			t.Fatalf("%d: err = %#v, want *OpError from Init with code %d", ret, err, ret)
		}
		if _, err := b.Device(0); !errors.Is(err, ErrNoNVML) {
			t.Fatalf("%d: Device err = %v, want ErrNoNVML", ret, err)
		}
		if _, err := SampleAll(b); !errors.Is(err, ErrNoNVML) {
			t.Fatalf("%d: SampleAll err = %v, want ErrNoNVML", ret, err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("%d: Close after failed init: %v", ret, err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("%d: second Close: %v", ret, err)
		}
		if _, err := b.DeviceCount(); !errors.Is(err, ErrClosed) {
			t.Fatalf("%d: after Close err = %v, want ErrClosed", ret, err)
		}
		if n := len(lib.InitCalls()); n != 1 {
			t.Fatalf("%d: Init called %d times, want 1 (a failed init must not be retried)", ret, n)
		}
	}
}

func TestBinding_CloseBeforeFirstUseNeverLoadsNVML(t *testing.T) {
	lib := &mock.Interface{} // Init and Shutdown nil: calling either panics.
	b := openMock(t, lib)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DeviceCount(); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}

func TestBinding_ShutdownExactlyOnceAndDevicesDieWithIt(t *testing.T) {
	f := newFakeNVML(1)
	b := openMock(t, f.lib)
	d, err := b.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	if name, err := d.Name(); err != nil || name != "NVIDIA H100 80GB HBM3" {
		t.Fatalf("Name = %q, %v", name, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(f.lib.ShutdownCalls()); n != 1 {
		t.Fatalf("Shutdown called %d times, want 1", n)
	}
	if _, err := d.Sample(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sample after Close: err = %v, want ErrClosed", err)
	}
	if _, err := d.Name(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Name after Close: err = %v, want ErrClosed", err)
	}
	if n := f.late.Load(); n != 0 {
		t.Fatalf("%d NVML calls after Shutdown", n)
	}
}

func TestBinding_ShutdownFailureStillClosesForGood(t *testing.T) {
	f := newFakeNVML(1)
	f.lib.ShutdownFunc = func() gonvml.Return { return gonvml.ERROR_UNKNOWN }
	b := openMock(t, f.lib)
	if _, err := b.DeviceCount(); err != nil {
		t.Fatal(err)
	}
	var op *OpError
	if err := b.Close(); !errors.As(err, &op) || op.Op != "Shutdown" {
		t.Fatalf("Close err = %v, want *OpError from Shutdown", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if n := len(f.lib.ShutdownCalls()); n != 1 {
		t.Fatalf("Shutdown called %d times, want 1", n)
	}
}

func TestBinding_UnsupportedFieldsAreFlaggedNotFatal(t *testing.T) {
	f := newFakeNVML(1)
	f.devs[0].GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	f.devs[0].GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{}, gonvml.ERROR_NO_PERMISSION
	}
	b := openMock(t, f.lib)
	defer b.Close()
	d, err := b.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Unsupported.String(), "utilization|power"; got != want {
		t.Fatalf("Unsupported = %s, want %s", got, want)
	}
	if s.PowerMilliwatts != 0 || s.GPUUtilPercent != 0 || s.MemoryTotalBytes != 80<<30 {
		t.Fatalf("sample %+v", s)
	}
}

func TestBinding_LostGPUIsTyped(t *testing.T) {
	f := newFakeNVML(2)
	f.devs[1].GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) { return gonvml.Memory{}, gonvml.ERROR_GPU_IS_LOST }
	b := openMock(t, f.lib)
	defer b.Close()
	got, err := SampleAll(b)
	if !errors.Is(err, ErrGPULost) {
		t.Fatalf("err = %v, want ErrGPULost", err)
	}
	var op *OpError
	if !errors.As(err, &op) || op.Device != 1 || op.Code != int(gonvml.ERROR_GPU_IS_LOST) || op.Op != "DeviceGetMemoryInfo" {
		t.Fatalf("err = %v, want OpError for device 1", err)
	}
	if len(got) != 1 || got[0].Index != 0 {
		t.Fatalf("healthy device missing: %+v", got)
	}
	if errors.Is(err, ErrNoNVML) {
		t.Fatal("a lost GPU is not NVML being unavailable")
	}
}

func TestBinding_OtherErrorsFailTheSample(t *testing.T) {
	f := newFakeNVML(1)
	f.devs[0].GetClockInfoFunc = func(gonvml.ClockType) (uint32, gonvml.Return) { return 0, gonvml.ERROR_UNKNOWN }
	b := openMock(t, f.lib)
	defer b.Close()
	d, err := b.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	var op *OpError
	if _, err := d.Sample(); !errors.As(err, &op) || op.Op != "DeviceGetClockInfo" {
		t.Fatalf("err = %v, want OpError from DeviceGetClockInfo", err)
	}
}

func TestBinding_DeviceIndexOutOfRange(t *testing.T) {
	f := newFakeNVML(2)
	b := openMock(t, f.lib)
	defer b.Close()
	for _, i := range []int{-1, 2, 100} {
		if _, err := b.Device(i); !errors.Is(err, ErrNoDevice) {
			t.Errorf("Device(%d): err = %v, want ErrNoDevice", i, err)
		}
	}
}

// Samplers racing with Close: every call either succeeds or reports
// ErrClosed, Shutdown runs once, and no NVML call lands after it.
func TestBinding_ConcurrentSamplingAndClose(t *testing.T) {
	f := newFakeNVML(4)
	b := openMock(t, f.lib)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if _, err := SampleAll(b); err != nil && !errors.Is(err, ErrClosed) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for f.calls.Load() < 100 { // let the samplers get going first
			runtime.Gosched()
		}
		if err := b.Close(); err != nil {
			errs <- err
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(f.lib.ShutdownCalls()); n != 1 {
		t.Fatalf("Shutdown called %d times, want 1", n)
	}
	if n := f.late.Load(); n != 0 {
		t.Fatalf("%d NVML calls after Shutdown", n)
	}
	if n := len(f.lib.InitCalls()); n != 1 {
		t.Fatalf("Init called %d times, want 1", n)
	}
}

func TestOpenLibrary_RejectsNilLibrary(t *testing.T) {
	if _, err := OpenLibrary(nil, Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v, want ErrInvalidConfig", err)
	}
	if !Compiled {
		t.Fatal("tagged build must contain the binding")
	}
}

// The real go-nvml, pointed at a library that does not exist: dlopen fails,
// Init reports ERROR_LIBRARY_NOT_FOUND, and nothing else in NVML may run.
// This exercises the real loading path on any machine, GPU or not.
func TestOpen_RealGoNVMLWithMissingLibraryFailsTyped(t *testing.T) {
	tel, err := Open(Config{LibraryPath: "/nonexistent/ringtail/libnvidia-ml.so.1"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := tel.DeviceCount(); !errors.Is(err, ErrNoNVML) {
			t.Fatalf("DeviceCount: err = %v, want ErrNoNVML", err)
		}
		if _, err := tel.Device(0); !errors.Is(err, ErrNoNVML) {
			t.Fatalf("Device: err = %v, want ErrNoNVML", err)
		}
	}
	if err := tel.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// Older drivers only export the throttle-reasons name; a driver with
// neither, or without field values, gets the fields flagged, never a call
// into a symbol that is not there (the mock panics if one is made).
func TestBinding_OptionalEntryPointsAreProbedNotCalledBlind(t *testing.T) {
	f := newFakeNVML(1)
	f.lib.ExtensionsFunc = func() gonvml.ExtendedInterface {
		return symbolsExcept("nvmlDeviceGetCurrentClocksEventReasons")
	}
	f.devs[0].GetCurrentClocksEventReasonsFunc = nil
	f.devs[0].GetCurrentClocksThrottleReasonsFunc = func() (uint64, gonvml.Return) {
		return gonvml.ClocksEventReasonGpuIdle, gonvml.SUCCESS
	}
	b := openMock(t, f.lib)
	got, err := SampleAll(b)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].ClockReasons != ClockIdle || got[0].Unsupported != 0 {
		t.Fatalf("old driver: reasons %s, unsupported %s", got[0].ClockReasons, got[0].Unsupported)
	}
	b.Close()

	f = newFakeNVML(1)
	f.lib.ExtensionsFunc = func() gonvml.ExtendedInterface {
		return symbolsExcept("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetFieldValues")
	}
	f.devs[0].GetCurrentClocksEventReasonsFunc = nil
	f.devs[0].GetFieldValuesFunc = nil
	b = openMock(t, f.lib)
	defer b.Close()
	got, err = SampleAll(b)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Unsupported.String() != "clock_reasons|nvlink" || got[0].NVLinkRxKiB != 0 {
		t.Fatalf("ancient driver: %+v", got[0])
	}
	if n := len(f.lib.ExtensionsCalls()); n != 1 {
		t.Fatalf("symbols probed %d times, want once after Init", n)
	}
}

func TestBinding_NVLinkWithoutLinksIsUnsupported(t *testing.T) {
	for name, fv := range map[string]func([]gonvml.FieldValue) gonvml.Return{
		"call not supported": func([]gonvml.FieldValue) gonvml.Return { return gonvml.ERROR_NOT_SUPPORTED },
		"field not supported": func(vals []gonvml.FieldValue) gonvml.Return {
			for i := range vals {
				vals[i].NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
			}
			return gonvml.SUCCESS
		},
		"not an integer": func(vals []gonvml.FieldValue) gonvml.Return {
			for i := range vals {
				vals[i].ValueType = uint32(gonvml.VALUE_TYPE_DOUBLE)
			}
			return gonvml.SUCCESS
		},
	} {
		f := newFakeNVML(1)
		f.devs[0].GetFieldValuesFunc = fv
		b := openMock(t, f.lib)
		got, err := SampleAll(b)
		b.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got[0].Unsupported != Fields(FieldNVLink) || got[0].NVLinkTxKiB != 0 {
			t.Fatalf("%s: %+v", name, got[0])
		}
	}
	f := newFakeNVML(1)
	f.devs[0].GetFieldValuesFunc = func([]gonvml.FieldValue) gonvml.Return { return gonvml.ERROR_GPU_IS_LOST }
	b := openMock(t, f.lib)
	defer b.Close()
	if _, err := SampleAll(b); !errors.Is(err, ErrGPULost) {
		t.Fatalf("lost GPU while reading NVLink: err = %v, want ErrGPULost", err)
	}
}

// The Sampler over the real binding whose NVML fails to initialise: the
// mock panics on any call but Init, so a single call after the failed Init
// would crash this test. Every tick reads the host instead.
func TestSampler_OverBindingWithFailedInitNeverCallsNVMLAgain(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() gonvml.Return { return gonvml.ERROR_DRIVER_NOT_LOADED }}
	b := openMock(t, lib)
	defer b.Close()
	h := startHarness(t, nil, SamplerConfig{Telemetry: b})
	r := h.next()
	for i := 0; i < 5; i++ {
		r = h.tick(time.Second)
	}
	if r.Source != SourceHost || !strings.Contains(r.GPUErr, "NVIDIA driver not loaded") {
		t.Fatalf("reading %+v", r)
	}
	if n := len(lib.InitCalls()); n != 1 {
		t.Fatalf("Init called %d times, want 1", n)
	}
	if n := h.logLines("running without GPU telemetry"); n != 1 {
		t.Fatalf("fallback announced %d times:\n%s", n, h.log)
	}
}

// The Sampler over a mocked H100 through the real binding: every field the
// lead wires into observations arrives, NVLink as a rate.
func TestSampler_OverMockedH100(t *testing.T) {
	f := newFakeNVML(2)
	b := openMock(t, f.lib)
	defer b.Close()
	h := startHarness(t, nil, SamplerConfig{Telemetry: b, Device: 1})
	first := h.next()
	r := h.tick(2 * time.Second)
	if r.Source != SourceNVML || r.GPU.Model != "H100" || r.GPU.SMClockMHz != 1980 || r.GPU.ClockReasons != ClockSWPowerCap|ClockHWThermal {
		t.Fatalf("reading %+v", r)
	}
	if first.GPU.NVLinkRxKiB != 5<<20 || r.NVLinkRxBytesPerSec != 0 {
		t.Fatalf("constant counters: first %+v, rate %v", first.GPU, r.NVLinkRxBytesPerSec)
	}
}

// Inspect on a host without a driver: one Init, which fails, and the
// inventory says why; nothing else of NVML is called (the mock panics on
// any entry point it was not given), not even by a second Inspect.
func TestInspect_NoDriverSaysWhyAndCallsNVMLNoMore(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND }}
	b := openMock(t, lib)
	defer b.Close()
	for range 2 {
		inv := Inspect(b)
		if !inv.Compiled || inv.Driver != "" || len(inv.Devices) != 0 {
			t.Fatalf("inventory %+v", inv)
		}
		if want := "no NVIDIA driver (libnvidia-ml.so.1 not found)"; inv.Reason != want {
			t.Fatalf("reason %q, want %q", inv.Reason, want)
		}
	}
	if n := len(lib.InitCalls()); n != 1 {
		t.Fatalf("Init called %d times, want 1", n)
	}
}

// Inspect over mocked GPUs lists the driver and every device's model and
// memory.
func TestInspect_MockedGPUs(t *testing.T) {
	f := newFakeNVML(2)
	f.lib.SystemGetDriverVersionFunc = func() (string, gonvml.Return) { return "550.54.15", gonvml.SUCCESS }
	b := openMock(t, f.lib)
	defer b.Close()
	inv := Inspect(b)
	if inv.Driver != "550.54.15" || inv.Reason != "" || len(inv.Devices) != 2 {
		t.Fatalf("inventory %+v", inv)
	}
	for i, d := range inv.Devices {
		if d.Index != i || d.Model != "H100" || d.MemoryTotalBytes != 80<<30 || d.Err != "" {
			t.Fatalf("device %d: %+v", i, d)
		}
	}
}

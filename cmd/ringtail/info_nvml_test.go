//go:build cgo && !ringtail_nonvml

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/ringtail-ml/ringtail/nvml"
)

// runInfoOn runs `ringtail info args...` over the mocked NVML lib.
func runInfoOn(t *testing.T, lib gonvml.Interface, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = info(args, &out, &errb, func(cfg nvml.Config) (nvml.Telemetry, error) { return nvml.OpenLibrary(lib, cfg) })
	return code, out.String(), errb.String()
}

// A host without the driver: Init fails (the mock panics on any other
// entry point, so NVML is never called after it), and info says NVML is
// compiled in, what the binding is, and why there is no GPU; exit 0.
func TestInfo_NoDriver(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND }}
	code, out, errs := runInfoOn(t, lib)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ringtail "+version+" (go") ||
		!strings.HasPrefix(lines[1], "nvml: compiled in") ||
		lines[2] != "nvml: no NVIDIA driver (libnvidia-ml.so.1 not found): running without GPU telemetry" {
		t.Fatalf("output:\n%s", out)
	}
	if n := len(lib.InitCalls()); n != 1 {
		t.Fatalf("Init called %d times, want 1", n)
	}

	code, out, _ = runInfoOn(t, &mock.Interface{InitFunc: func() gonvml.Return { return gonvml.ERROR_DRIVER_NOT_LOADED }}, "--json")
	var rep infoReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("exit %d, --json %q: %v", code, out, err)
	}
	if !rep.NVML.Compiled || rep.NVML.Reason != "NVIDIA driver not loaded" || len(rep.NVML.Devices) != 0 {
		t.Fatalf("--json: %+v", rep)
	}
}

// mockGPU is a mocked device that reports its name and memory; every other
// reading is unsupported.
func mockGPU(name string, mem uint64) *mock.Device {
	none := gonvml.ERROR_NOT_SUPPORTED
	return &mock.Device{
		GetNameFunc:             func() (string, gonvml.Return) { return name, gonvml.SUCCESS },
		GetUUIDFunc:             func() (string, gonvml.Return) { return "", none },
		GetMemoryInfoFunc:       func() (gonvml.Memory, gonvml.Return) { return gonvml.Memory{Total: mem, Free: mem}, gonvml.SUCCESS },
		GetClockInfoFunc:        func(gonvml.ClockType) (uint32, gonvml.Return) { return 0, none },
		GetUtilizationRatesFunc: func() (gonvml.Utilization, gonvml.Return) { return gonvml.Utilization{}, none },
		GetPcieThroughputFunc:   func(gonvml.PcieUtilCounter) (uint32, gonvml.Return) { return 0, none },
		GetPowerUsageFunc:       func() (uint32, gonvml.Return) { return 0, none },
	}
}

// A V100 (32 GB) beside a P100 (16 GB): the driver, the count, each model
// and its memory.
func TestInfo_MockedV100AndP100(t *testing.T) {
	devs := []*mock.Device{mockGPU("Tesla V100-SXM2-32GB", 32<<30), mockGPU("Tesla P100-PCIE-16GB", 16<<30)}
	lib := &mock.Interface{
		InitFunc:     func() gonvml.Return { return gonvml.SUCCESS },
		ShutdownFunc: func() gonvml.Return { return gonvml.SUCCESS },
		ExtensionsFunc: func() gonvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return gonvml.ERROR_FUNCTION_NOT_FOUND }}
		},
		SystemGetDriverVersionFunc: func() (string, gonvml.Return) { return "535.183.01", gonvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, gonvml.Return) { return len(devs), gonvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (gonvml.Device, gonvml.Return) { return devs[i], gonvml.SUCCESS },
	}
	code, out, errs := runInfoOn(t, lib)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{
		"nvml: driver 535.183.01, 2 GPU(s)\n",
		"  gpu 0: Tesla V100-SXM2-32GB (model V100, 32.0 GiB)\n",
		"  gpu 1: Tesla P100-PCIE-16GB (model P100, 16.0 GiB)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
}

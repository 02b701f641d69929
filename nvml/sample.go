package nvml

import (
	"fmt"
	"strings"
)

// Sample is one reading of one GPU. It is plain data: it can be copied,
// compared and serialised, and holds no handle to the device. It carries no
// timestamp; the caller stamps it with its own clock.
//
// Fields that the device does not support (NVML_ERROR_NOT_SUPPORTED or
// NVML_ERROR_NO_PERMISSION, common for power on consumer boards and for
// utilisation under MIG) are left zero and flagged in Unsupported.
type Sample struct {
	// Index is the NVML device index.
	Index int
	// UUID is the device's UUID ("GPU-…"), empty when unsupported.
	UUID string
	// Name is the marketing name as NVML reports it, e.g.
	// "NVIDIA H100 80GB HBM3".
	Name string
	// Model is NormalizeModel(Name), e.g. "H100"; empty if unknown.
	Model string

	// MemoryTotalBytes is the installed frame-buffer memory.
	MemoryTotalBytes uint64
	// MemoryUsedBytes is the allocated frame-buffer memory.
	MemoryUsedBytes uint64
	// MemoryFreeBytes is the unallocated frame-buffer memory.
	MemoryFreeBytes uint64

	// SMClockMHz is the current streaming-multiprocessor clock.
	SMClockMHz uint32

	// GPUUtilPercent is the percentage of the last sample period (1/6 s to
	// 1 s, device dependent) during which a kernel was running.
	GPUUtilPercent uint32
	// MemoryUtilPercent is the percentage of that period during which
	// device memory was being read or written.
	MemoryUtilPercent uint32

	// PCIeRxKBps is PCIe receive throughput in KB/s over NVML's 20 ms
	// window, as NVML reports it.
	PCIeRxKBps uint32
	// PCIeTxKBps is PCIe transmit throughput in KB/s over the same window.
	PCIeTxKBps uint32

	// PowerMilliwatts is the board's power draw.
	PowerMilliwatts uint32

	// ClockReasons says why the clocks are below their maximum (NVML's
	// clocks event reasons, called throttle reasons by older drivers).
	ClockReasons ClockReasons

	// NVLinkRxKiB is the data received over all NVLinks, in KiB, counted
	// by the driver since it loaded; a Sampler turns two readings into a
	// rate. Zero and flagged FieldNVLink on devices without NVLink.
	NVLinkRxKiB uint64
	// NVLinkTxKiB is the data sent over all NVLinks, in KiB, likewise.
	NVLinkTxKiB uint64

	// Unsupported lists the fields the device could not report.
	Unsupported Fields
}

// Field names one optional group of Sample fields.
type Field uint16

// The optional Sample field groups.
const (
	// FieldUUID is Sample.UUID.
	FieldUUID Field = 1 << iota
	// FieldMemory is the three Memory* fields.
	FieldMemory
	// FieldSMClock is SMClockMHz.
	FieldSMClock
	// FieldUtilization is GPUUtilPercent and MemoryUtilPercent.
	FieldUtilization
	// FieldPCIeRx is PCIeRxKBps.
	FieldPCIeRx
	// FieldPCIeTx is PCIeTxKBps.
	FieldPCIeTx
	// FieldPower is PowerMilliwatts.
	FieldPower
	// FieldClockReasons is ClockReasons.
	FieldClockReasons
	// FieldNVLink is NVLinkRxKiB and NVLinkTxKiB.
	FieldNVLink
)

// fieldNames lists the field groups in bit order, for String.
func fieldNames() []struct {
	f    Field
	name string
} {
	return []struct {
		f    Field
		name string
	}{
		{FieldUUID, "uuid"},
		{FieldMemory, "memory"},
		{FieldSMClock, "sm_clock"},
		{FieldUtilization, "utilization"},
		{FieldPCIeRx, "pcie_rx"},
		{FieldPCIeTx, "pcie_tx"},
		{FieldPower, "power"},
		{FieldClockReasons, "clock_reasons"},
		{FieldNVLink, "nvlink"},
	}
}

// Fields is a set of Field values.
type Fields uint16

// Has reports whether f is in the set.
func (s Fields) Has(f Field) bool { return uint16(s)&uint16(f) != 0 }

// With returns the set with f added.
func (s Fields) With(f Field) Fields { return Fields(uint16(s) | uint16(f)) }

// String lists the set's fields in a fixed order, joined by "|", or "none".
func (s Fields) String() string {
	var parts []string
	for _, fn := range fieldNames() {
		if s.Has(fn.f) {
			parts = append(parts, fn.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// ClockReasons is NVML's bit set of reasons the device's clocks are below
// their maximum (nvmlClocksEventReasons; the bit values are NVML's).
type ClockReasons uint64

// The clock reasons NVML reports.
const (
	// ClockIdle: nothing is running, the clocks are down to save power.
	ClockIdle ClockReasons = 1 << 0
	// ClockApplicationsSetting: the clocks are held by an applications
	// clocks setting.
	ClockApplicationsSetting ClockReasons = 1 << 1
	// ClockSWPowerCap: the software power cap holds the clocks down.
	ClockSWPowerCap ClockReasons = 1 << 2
	// ClockHWSlowdown: hardware slowdown (temperature or power brake).
	ClockHWSlowdown ClockReasons = 1 << 3
	// ClockSyncBoost: held to the slowest GPU of a sync-boost group.
	ClockSyncBoost ClockReasons = 1 << 4
	// ClockSWThermal: software thermal slowdown.
	ClockSWThermal ClockReasons = 1 << 5
	// ClockHWThermal: hardware thermal slowdown.
	ClockHWThermal ClockReasons = 1 << 6
	// ClockHWPowerBrake: the external power brake is asserted.
	ClockHWPowerBrake ClockReasons = 1 << 7
	// ClockDisplaySetting: held by the display clock setting.
	ClockDisplaySetting ClockReasons = 1 << 8
)

// clockReasonNames lists the reasons in bit order, for String.
func clockReasonNames() []string {
	return []string{"idle", "applications_clocks", "sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal", "hw_thermal", "hw_power_brake", "display_clocks"}
}

// Slowing reports whether a reason that makes a busy device slower than it
// could be is set: a power cap, thermal or hardware slowdown, the power
// brake, or sync boost. Idle and clock settings are not slowdowns.
func (r ClockReasons) Slowing() bool {
	return r&(ClockSWPowerCap|ClockHWSlowdown|ClockSyncBoost|ClockSWThermal|ClockHWThermal|ClockHWPowerBrake) != 0
}

// String lists the set reasons joined by "|" ("none" for none; unknown
// bits as a hex remainder).
func (r ClockReasons) String() string {
	var parts []string
	for i, name := range clockReasonNames() {
		if r&(1<<i) != 0 {
			parts = append(parts, name)
		}
	}
	if rest := r &^ (1<<len(clockReasonNames()) - 1); rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint64(rest)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

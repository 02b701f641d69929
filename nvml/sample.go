package nvml

import "strings"

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

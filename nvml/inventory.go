package nvml

// DriverVersioner is implemented by a Telemetry that can report the
// NVIDIA driver's version (the NVML binding does).
type DriverVersioner interface {
	// DriverVersion returns the driver's version, e.g. "550.54.15".
	DriverVersion() (string, error)
}

// Inventory is what a Telemetry finds on this machine: whether the NVML
// binding is compiled in, the driver, and the GPUs, or why there are none.
// `ringtail info` prints it. It is plain data.
type Inventory struct {
	// Compiled is this build's Compiled.
	Compiled bool `json:"compiled"`
	// Driver is the NVIDIA driver's version ("" when unknown).
	Driver string `json:"driver,omitempty"`
	// Devices are the GPUs NVML reports, in index order.
	Devices []InventoryDevice `json:"devices"`
	// Reason says why there are no devices (see Reason); "" when there
	// are some.
	Reason string `json:"reason,omitempty"`
}

// InventoryDevice is one GPU of an Inventory.
type InventoryDevice struct {
	Index int `json:"index"`
	// Name is the marketing name and Model its normalised model
	// (NormalizeModel).
	Name  string `json:"name,omitempty"`
	Model string `json:"model,omitempty"`
	// MemoryTotalBytes is the device's memory (0 when unknown).
	MemoryTotalBytes uint64 `json:"memory_total_bytes,omitempty"`
	// Err is why the device could not be read ("" when it could).
	Err string `json:"error,omitempty"`
}

// Inspect asks t what it finds. A failed initialisation ends the
// inspection at the device count: t (the binding) then calls NVML no more.
func Inspect(t Telemetry) Inventory {
	inv := Inventory{Compiled: Compiled, Devices: []InventoryDevice{}}
	n, err := t.DeviceCount()
	if err != nil {
		inv.Reason = Reason(err)
		return inv
	}
	if dv, ok := t.(DriverVersioner); ok {
		if v, err := dv.DriverVersion(); err == nil {
			inv.Driver = v
		}
	}
	if n == 0 {
		inv.Reason = "NVML reports no GPU"
		return inv
	}
	for i := range n {
		d := InventoryDevice{Index: i}
		dev, err := t.Device(i)
		var s Sample
		if err == nil {
			s, err = dev.Sample()
		}
		if err != nil {
			d.Err = err.Error()
		} else {
			d.Name, d.Model = s.Name, s.Model
			if d.Model == "" {
				d.Model = NormalizeModel(s.Name)
			}
			if !s.Unsupported.Has(FieldMemory) {
				d.MemoryTotalBytes = s.MemoryTotalBytes
			}
		}
		inv.Devices = append(inv.Devices, d)
	}
	return inv
}

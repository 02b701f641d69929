package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/ringtail-ml/ringtail/internal/cli"
	"github.com/ringtail-ml/ringtail/nvml"
)

// goNVML is the module of the NVML binding.
const goNVML = "github.com/NVIDIA/go-nvml"

// infoReport is `ringtail info --json`.
type infoReport struct {
	Version  string `json:"version"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// GoNVML is the go-nvml module version linked in ("" without it).
	GoNVML string         `json:"go_nvml,omitempty"`
	NVML   nvml.Inventory `json:"nvml"`
}

func runInfo(args []string, stdout, stderr io.Writer) int {
	return info(args, stdout, stderr, nvml.Open)
}

// info is `ringtail info` over open (nvml.Open; tests pass a mocked one).
func info(args []string, stdout, stderr io.Writer, open func(nvml.Config) (nvml.Telemetry, error)) int {
	c := cli.New("ringtail info", `Usage: ringtail info [--json] [--nvml-library PATH]

Prints this binary's version and whether the NVML binding is compiled in
(the default build has it; CGO_ENABLED=0 or -tags ringtail_nonvml leave it
out), then what NVML finds: the driver version and each GPU's model and
memory, or why there is none (a host without the NVIDIA driver runs without
GPU telemetry). Exits 0 either way.
`)
	asJSON := c.Flags.Bool("json", false, "print one line of JSON")
	lib := c.Flags.String("nvml-library", "", "absolute `path` of libnvidia-ml.so.1 (default: the dynamic loader's search path)")
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	tel, err := open(nvml.Config{LibraryPath: *lib})
	if err != nil {
		return c.Fail(stderr, "%v", err)
	}
	rep := infoReport{
		Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		GoNVML: moduleVersion(goNVML), NVML: nvml.Inspect(tel),
	}
	if err := tel.Close(); err != nil {
		fmt.Fprintf(stderr, "ringtail info: %v\n", err)
		return 1
	}
	if *asJSON {
		if err := printJSONLine(stdout, rep); err != nil {
			fmt.Fprintf(stderr, "ringtail info: %v\n", err)
			return 1
		}
		return 0
	}
	writeInfo(stdout, rep)
	return 0
}

// writeInfo prints rep as text.
func writeInfo(w io.Writer, rep infoReport) {
	fmt.Fprintf(w, "ringtail %s (%s %s)\n", rep.Version, rep.Go, rep.Platform)
	inv := rep.NVML
	if !inv.Compiled {
		fmt.Fprintf(w, "nvml: %s: running without GPU telemetry\n", inv.Reason)
		return
	}
	if rep.GoNVML != "" {
		fmt.Fprintf(w, "nvml: compiled in (%s %s)\n", goNVML, rep.GoNVML)
	} else {
		fmt.Fprintln(w, "nvml: compiled in")
	}
	driver := ""
	if inv.Driver != "" {
		driver = "driver " + inv.Driver + ", "
	}
	if len(inv.Devices) == 0 {
		fmt.Fprintf(w, "nvml: %s%s: running without GPU telemetry\n", driver, inv.Reason)
		return
	}
	fmt.Fprintf(w, "nvml: %s%d GPU(s)\n", driver, len(inv.Devices))
	for _, d := range inv.Devices {
		switch {
		case d.Err != "":
			fmt.Fprintf(w, "  gpu %d: %s\n", d.Index, d.Err)
		case d.MemoryTotalBytes > 0:
			fmt.Fprintf(w, "  gpu %d: %s (model %s, %.1f GiB)\n", d.Index, d.Name, d.Model, float64(d.MemoryTotalBytes)/(1<<30))
		default:
			fmt.Fprintf(w, "  gpu %d: %s (model %s)\n", d.Index, d.Name, d.Model)
		}
	}
}

// moduleVersion returns the version of module path linked into this
// binary, or "" when it is not (or there is no build information).
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return ""
}

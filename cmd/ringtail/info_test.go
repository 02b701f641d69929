package main

import (
	"strings"
	"testing"

	"github.com/ringtail-ml/ringtail/nvml"
)

// `ringtail info` on this machine, whatever it has: the version line, then
// the NVML lines of this build; exit 0 with nothing on stderr.
func TestInfo_ThisMachine(t *testing.T) {
	code, out, errs := ringtailCLI("info")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if !strings.HasPrefix(out, "ringtail "+version+" ") {
		t.Fatalf("output:\n%s", out)
	}
	if got := strings.Contains(out, "nvml: compiled in"); got != nvml.Compiled {
		t.Fatalf("says compiled in: %v, nvml.Compiled %v:\n%s", got, nvml.Compiled, out)
	}
}

func TestInfo_BadFlagsExit2WithOneLine(t *testing.T) {
	for _, args := range [][]string{{"info", "--bogus"}, {"info", "extra"}, {"info", "--nvml-library", "relative.so"}} {
		code, out, errs := ringtailCLI(args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "ringtail info: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
}

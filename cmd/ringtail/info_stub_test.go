//go:build !cgo || ringtail_nonvml

package main

import (
	"strings"
	"testing"
)

// A build without the binding (CGO_ENABLED=0 or -tags ringtail_nonvml)
// says so, and how it was built; exit 0.
func TestInfo_NotCompiledIn(t *testing.T) {
	code, out, errs := ringtailCLI("info")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	want := "nvml: NVML not compiled in (built with CGO_ENABLED=0 or -tags ringtail_nonvml): running without GPU telemetry\n"
	if !strings.HasSuffix(out, want) || strings.Count(out, "\n") != 2 {
		t.Fatalf("output:\n%s", out)
	}
}

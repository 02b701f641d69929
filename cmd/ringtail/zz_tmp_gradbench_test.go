package main

import (
	"os"
	"strings"
	"testing"
)

func TestTmpGradBench(t *testing.T) {
	if rc := runBenchGradcode(strings.Fields(os.Getenv("GB_ARGS")), os.Stdout, os.Stderr); rc != 0 {
		t.Fatal(rc)
	}
}

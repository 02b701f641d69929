package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The recovery bench re-executes this test binary as ranks (elastic.go's
// init turns it into one), kills one and reports JSON.
func TestBenchRecoveryJSON(t *testing.T) {
	args := []string{"--json", "--np", "3", "--runs", "1", "--elems", "4096"}
	if extra := os.Getenv("RINGTAIL_TEST_RECOVERY_ARGS"); extra != "" { // measurements: e.g. "--np 4 --runs 20"
		args = append([]string{"--json"}, strings.Fields(extra)...)
	}
	var out, errb bytes.Buffer
	code := runBenchRecovery(args, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var row benchRecoveryRow
	if err := json.Unmarshal(out.Bytes(), &row); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	t.Logf("%s", bytes.TrimSpace(out.Bytes()))
	if row.Case != "recovery" || row.Scheme != "elastic" || row.RecoveryS <= 0 || row.RecoveryS > 2 || row.NP < 2 || len(row.All) != row.Runs {
		t.Fatalf("row %+v", row)
	}
}

func TestBenchRecoveryBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--np", "1"}, {"--victim", "4"}, {"--runs", "0"}, {"extra"}, {"--nope"}} {
		var out, errb bytes.Buffer
		if code := runBenchRecovery(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d", args, code)
		}
	}
	var out, errb bytes.Buffer
	if code := runBenchRecovery([]string{"--help"}, &out, &errb); code != 0 {
		t.Errorf("--help: exit %d", code)
	}
}

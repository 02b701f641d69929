package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestExternalWorldNeedsRankAndWorldSize(t *testing.T) {
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	if n, ok := externalWorld(env(map[string]string{"RANK": "1", "WORLD_SIZE": "4"})); !ok || n != 4 {
		t.Fatalf("externalWorld = %d, %v", n, ok)
	}
	if n, ok := externalWorld(env(map[string]string{"JOB_COMPLETION_INDEX": "2", "WORLD_SIZE": "8"})); !ok || n != 8 {
		t.Fatalf("an Indexed Job's pod: externalWorld = %d, %v", n, ok)
	}
	slurmTask := map[string]string{"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "4",
		"SLURM_LOCALID": "1", "SLURM_NODEID": "0", "SLURM_STEP_NODELIST": "n1", "SLURM_STEP_TASKS_PER_NODE": "4"}
	if n, ok := externalWorld(env(slurmTask)); !ok || n != 4 {
		t.Fatalf("a task of srun -n 4: externalWorld = %d, %v", n, ok)
	}
	for _, kv := range []map[string]string{{"WORLD_SIZE": "4"}, {"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, {"RANK": "0"}, {"RANK": "0", "WORLD_SIZE": "x"}, {}} {
		if _, ok := externalWorld(env(kv)); ok {
			t.Errorf("externalWorld(%v) = true", kv)
		}
	}
}

func TestBenchUnderALauncherRefusesAnotherNP(t *testing.T) {
	t.Setenv("RANK", "0")
	t.Setenv("WORLD_SIZE", "2")
	var out, errb bytes.Buffer
	code := runBench([]string{"allreduce", "-np", "3", "-e", "1K"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "-np 3, but the launcher started 2 ranks (WORLD_SIZE)") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

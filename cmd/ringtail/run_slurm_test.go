//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSrunScript writes a stand-in for srun: it starts --ntasks copies of
// the command with the task variables srun sets (one node, "localhost")
// and labels their output lines, stdout and stderr merged.
func fakeSrunScript(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "srun")
	script := `#!/bin/sh
n=1
while [ $# -gt 0 ]; do case $1 in --ntasks=*) n=${1#--ntasks=};; --*) ;; *) break;; esac; shift; done
echo "srun flags ok" >&2
i=0
while [ $i -lt $n ]; do
  SLURM_STEP_ID=0 SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NODEID=0 SLURM_STEP_TASKS_PER_NODE=$n SLURMD_NODENAME=localhost \
    "$@" 2>&1 | sed "s/^/$i: /" &
  i=$((i+1))
done
wait
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// inAllocation sets the variables of an salloc shell with tasks on
// localhost, and clears those of a job step.
func inAllocation(t *testing.T, tasks string) {
	for name, value := range map[string]string{"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "localhost", "SLURM_NTASKS": tasks, "SLURM_TASKS_PER_NODE": tasks} {
		t.Setenv(name, value)
	}
	for _, name := range []string{"SLURM_STEP_ID", "SLURM_STEPID", "SLURM_JOBID", "SLURM_NODELIST", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
}

const printContract = `echo "rank=$RANK of $WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE coord=$RINGTAIL_COORDINATOR"`

func TestRunCLIUsesSrunInsideAnAllocation(t *testing.T) {
	inAllocation(t, "3")
	code, stdout, stderr := launchCLI(t, context.Background(), "--srun", fakeSrunScript(t), "--", "sh", "-c", printContract)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(stderr, "srun flags ok") {
		t.Error("the ranks were not started by srun")
	}
	for _, want := range []string{"[0] rank=0 of 3 local=0/3 coord=external\n", "[2] rank=2 of 3 local=2/3 coord=external\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	code, stdout, _ = launchCLI(t, context.Background(), "-np", "2", "--srun", fakeSrunScript(t), "--", "sh", "-c", printContract)
	if code != 0 || !strings.Contains(stdout, "[1] rank=1 of 2 local=1/2") || strings.Contains(stdout, "[2]") {
		t.Errorf("-np 2 of 3 tasks: exit %d", code)
	}
}

func TestRunCLIStaysDirectWithHostsOrInsideAStep(t *testing.T) {
	inAllocation(t, "2")
	srun := fakeSrunScript(t)
	code, _, stderr := launchCLI(t, context.Background(), "-H", "localhost:2", "--srun", srun, "--", "sh", "-c", printContract)
	if code != 0 || strings.Contains(stderr, "srun flags ok") {
		t.Errorf("-H inside an allocation: exit %d, srun used: %v", code, strings.Contains(stderr, "srun flags ok"))
	}
	t.Setenv("SLURM_STEP_ID", "0") // a task of a step: a nested srun would wait forever
	code, stdout, stderr := launchCLI(t, context.Background(), "-np", "2", "--srun", srun, "--", "sh", "-c", printContract)
	if code != 0 || strings.Contains(stderr, "srun flags ok") || !strings.Contains(stdout, "[1] rank=1 of 2") {
		t.Errorf("inside a step: exit %d", code)
	}
	t.Setenv("SLURM_STEP_ID", "4294967290") // salloc's interactive step: srun works there
	if code, _, stderr := launchCLI(t, context.Background(), "--srun", srun, "--", "true"); code != 0 || !strings.Contains(stderr, "srun flags ok") {
		t.Errorf("interactive step: exit %d, srun used: %v", code, strings.Contains(stderr, "srun flags ok"))
	}
}

func TestRunCLILauncherUsageErrors(t *testing.T) {
	for _, name := range []string{"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	for want, args := range map[string][]string{
		"--launcher srun: not inside a Slurm allocation": {"--launcher", "srun", "true"},
		`--launcher "mpi" must be auto, direct or srun`:  {"--launcher", "mpi", "-np", "1", "true"},
		"--srun is empty": {"--srun", " ", "-np", "1", "true"},
	} {
		if code, _, stderr := launchCLI(t, context.Background(), args...); code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("%q: exit %d, want 2 and %q", args, code, want)
		}
	}
	inAllocation(t, "2")
	for want, args := range map[string][]string{
		"-np 3 exceeds the 2 tasks of Slurm job 77":  {"-np", "3", "true"},
		"--launcher srun takes the hosts from Slurm": {"--launcher", "srun", "-H", "a:2", "true"},
	} {
		if code, _, stderr := launchCLI(t, context.Background(), args...); code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("%q: exit %d, want 2 and %q", args, code, want)
		}
	}
	t.Setenv("SLURM_TASKS_PER_NODE", "2(x2)")
	if code, _, stderr := launchCLI(t, context.Background(), "true"); code != 2 || !strings.Contains(stderr, "lists 2 nodes but SLURM_JOB_NODELIST has 1") {
		t.Errorf("inconsistent allocation: exit %d", code)
	}
}

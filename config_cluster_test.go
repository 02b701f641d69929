package ringtail

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/launch/slurm"
)

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) { v, ok := m[name]; return v, ok }
}

// srunTask is what srun gives task 5 of `srun -N 3 -n 7` (block
// distribution: 3, 3 and 1 tasks), with the job secret on a shared file
// system.
func srunTask(t *testing.T) map[string]string {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "1", "SLURM_PROCID": "5", "SLURM_LOCALID": "2", "SLURM_NODEID": "1",
		"SLURM_STEP_NUM_TASKS": "7", "SLURM_STEP_TASKS_PER_NODE": "3(x2),1", "SLURM_STEP_NODELIST": "node[07-08],node11",
		"SLURM_JOB_NODELIST": "node[01-16]", "SLURM_NTASKS": "64",
		EnvSecretFile: secret,
	}
}

func TestConfigFromLookupMapsASlurmTask(t *testing.T) {
	env := srunTask(t)
	c, err := ConfigFromLookup(lookupIn(env))
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank != 5 || c.WorldSize != 7 || c.LocalRank != 2 || c.LocalWorldSize != 3 {
		t.Errorf("rank %d/%d local %d/%d, want 5/7 local 2/3", c.Rank, c.WorldSize, c.LocalRank, c.LocalWorldSize)
	}
	if c.MasterAddr != "node07" || c.MasterPort != slurm.PortBase+(42421%slurm.PortSpan) || c.JobID != "slurm-4242.1" {
		t.Errorf("rendezvous %s:%d job %q", c.MasterAddr, c.MasterPort, c.JobID)
	}
	if string(c.Secret) != "s3cret-0123456789" || c.ExternalCoordinator {
		t.Errorf("secret %q external %v", c.Secret, c.ExternalCoordinator)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}

	// What is set wins over what Slurm implies.
	env[EnvMasterPort], env[EnvMasterAddr], env[EnvJobID], env[EnvLocalWorldSize] = "31000", "10.1.0.7", "exp1", "4"
	c, err = ConfigFromLookup(lookupIn(env))
	if err != nil || c.MasterPort != 31000 || c.MasterAddr != "10.1.0.7" || c.JobID != "exp1" || c.LocalWorldSize != 4 || c.Rank != 5 {
		t.Errorf("overrides: %+v, %v", c, err)
	}
	delete(env, EnvJobID)
	if c, _ := ConfigFromLookup(lookupIn(env)); c.JobID != "slurm-4242.1" {
		t.Errorf("job id %q without RINGTAIL_JOB_ID, want the step's", c.JobID)
	}
}

func TestConfigFromLookupLeavesSlurmAloneWhenRankIsSet(t *testing.T) {
	env := srunTask(t)
	// As under ringtail run or torchrun inside a Slurm step: their
	// variables rule, and Slurm's (even malformed ones) are not read.
	maps.Copy(env, map[string]string{EnvRank: "1", EnvWorldSize: "2", EnvMasterAddr: "127.0.0.1", EnvMasterPort: "29500", "SLURM_PROCID": "x"})
	c, err := ConfigFromLookup(lookupIn(env))
	if err != nil || c.Rank != 1 || c.WorldSize != 2 || c.LocalRank != 1 || c.LocalWorldSize != 2 || c.JobID != "job@127.0.0.1:29500" {
		t.Fatalf("%+v, %v", c, err)
	}
}

func TestConfigFromLookupIgnoresABatchScript(t *testing.T) {
	// A batch script has SLURM_PROCID=0 and SLURM_NTASKS but is not a task
	// of a step: a program run there alone is a world of one.
	env := map[string]string{"SLURM_JOB_ID": "4", "SLURM_JOB_NODELIST": "vm", "SLURM_NTASKS": "3", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_TASKS_PER_NODE": "3"}
	c, err := ConfigFromLookup(lookupIn(env))
	if err != nil || c.Rank != 0 || c.WorldSize != 1 || c.Validate() != nil {
		t.Fatalf("%+v, %v", c, err)
	}
}

func TestConfigFromLookupReportsABadSlurmTask(t *testing.T) {
	env := srunTask(t)
	env["SLURM_STEP_NODELIST"] = "node[08-07]"
	env["SLURM_LOCALID"] = "two"
	_, err := ConfigFromLookup(lookupIn(env))
	if err == nil || !strings.Contains(err.Error(), "SLURM_STEP_NODELIST") || !strings.Contains(err.Error(), "SLURM_LOCALID") {
		t.Fatalf("err = %v, want both variables named", err)
	}
}

func TestConfigFromLookupMapsAnIndexedJobPod(t *testing.T) {
	env := map[string]string{
		EnvJobCompletionIndex: "3", EnvWorldSize: "4", EnvMasterAddr: "ringtail-train-0.ringtail-train",
		EnvMasterPort: "29500", EnvSecret: "k8s-secret-0123456789",
	}
	c, err := ConfigFromLookup(lookupIn(env))
	if err != nil || c.Validate() != nil {
		t.Fatalf("%+v, %v", c, err)
	}
	if c.Rank != 3 || c.WorldSize != 4 || c.LocalRank != 0 || c.LocalWorldSize != 1 ||
		c.JobID != "job@ringtail-train-0.ringtail-train:29500" || c.ExternalCoordinator {
		t.Errorf("rank %d/%d local %d/%d job %q", c.Rank, c.WorldSize, c.LocalRank, c.LocalWorldSize, c.JobID)
	}
	env[EnvRank] = "1" // a PyTorchJob-style RANK wins
	if c, _ := ConfigFromLookup(lookupIn(env)); c.Rank != 1 || c.LocalRank != 1 {
		t.Errorf("RANK set: rank %d local %d", c.Rank, c.LocalRank)
	}
	delete(env, EnvRank)
	delete(env, EnvWorldSize)
	if _, err := ConfigFromLookup(lookupIn(env)); err == nil || !strings.Contains(err.Error(), "WORLD_SIZE") {
		t.Errorf("no WORLD_SIZE: %v", err)
	}
	env[EnvWorldSize], env[EnvJobCompletionIndex] = "4", "three"
	if _, err := ConfigFromLookup(lookupIn(env)); err == nil || !strings.Contains(err.Error(), EnvJobCompletionIndex) {
		t.Errorf("bad index: %v", err)
	}
}

func TestConfigFromLookupAsksForTheClusterVariables(t *testing.T) {
	for _, env := range []map[string]string{{}, {EnvRank: "0"}, srunTask(t)} {
		asked := map[string]bool{}
		ConfigFromLookup(func(name string) (string, bool) { asked[name] = true; v, ok := env[name]; return v, ok })
		for _, name := range append(slurm.TaskNames(), EnvJobCompletionIndex) {
			if !asked[name] {
				t.Errorf("with %v set, %s is never asked for (the C API's overrides would refuse it)", env, name)
			}
		}
	}
}

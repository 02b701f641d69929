package slurm

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// mapLookup looks names up in m and records every name asked for.
func mapLookup(m map[string]string, asked map[string]bool) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if asked != nil {
			asked[name] = true
		}
		v, ok := m[name]
		return v, ok
	}
}

// srunTask1 is the environment Slurm 22.05 gave task 1 of `srun -n 4` on
// the one-node test cluster (the variables this package reads, and a few
// it does not).
var srunTask1 = map[string]string{
	"SLURMD_NODENAME": "vm", "SLURM_CPUS_ON_NODE": "4", "SLURM_GTIDS": "0,1,2,3",
	"SLURM_JOBID": "3", "SLURM_JOB_ID": "3", "SLURM_JOB_NODELIST": "vm", "SLURM_JOB_NUM_NODES": "1",
	"SLURM_LOCALID": "1", "SLURM_NNODES": "1", "SLURM_NODEID": "0", "SLURM_NODELIST": "vm",
	"SLURM_NPROCS": "4", "SLURM_NTASKS": "4", "SLURM_PROCID": "1", "SLURM_STEPID": "0", "SLURM_STEP_ID": "0",
	"SLURM_STEP_NODELIST": "vm", "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NUM_TASKS": "4",
	"SLURM_STEP_TASKS_PER_NODE": "4", "SLURM_TASKS_PER_NODE": "4",
}

// batchStep is what the batch script of `sbatch -n 3` sees: SLURM_PROCID
// and SLURM_NTASKS, but no step id.
var batchStep = map[string]string{
	"SLURM_JOBID": "4", "SLURM_JOB_ID": "4", "SLURM_JOB_NODELIST": "vm", "SLURM_LOCALID": "0",
	"SLURM_NODEID": "0", "SLURM_NODELIST": "vm", "SLURM_NPROCS": "3", "SLURM_NTASKS": "3",
	"SLURM_PROCID": "0", "SLURM_TASKS_PER_NODE": "3", "SLURM_JOB_CPUS_PER_NODE": "3",
}

func TestTaskFromLookupReadsWhatSrunSets(t *testing.T) {
	task, ok, err := TaskFromLookup(mapLookup(srunTask1, nil))
	want := Task{JobID: "3", StepID: "0", Rank: 1, World: 4, LocalRank: 1, LocalWorld: 4, Node: 0, Nodes: []string{"vm"}}
	if !ok || err != nil || !reflect.DeepEqual(task, want) {
		t.Fatalf("TaskFromLookup = %+v, %v, %v; want %+v", task, ok, err, want)
	}
	if task.MasterAddr() != "vm" || task.MasterPort() != PortBase+30 || task.Name() != "slurm-3.0" {
		t.Fatalf("master %s:%d name %s", task.MasterAddr(), task.MasterPort(), task.Name())
	}
}

func TestTaskOnTheThirdNodeOfAnUnevenStep(t *testing.T) {
	env := map[string]string{
		"SLURM_JOB_ID": "81234", "SLURM_STEP_ID": "2", "SLURM_PROCID": "6", "SLURM_LOCALID": "0",
		"SLURM_NODEID": "3", "SLURM_STEP_NUM_TASKS": "7", "SLURM_STEP_TASKS_PER_NODE": "2(x3),1",
		"SLURM_STEP_NODELIST": "gpu[07-09],gpu12", "SLURM_JOB_NODELIST": "gpu[01-16]",
		"SLURM_NTASKS": "32", "SLURM_TASKS_PER_NODE": "2(x16)",
	}
	task, ok, err := TaskFromLookup(mapLookup(env, nil))
	want := Task{JobID: "81234", StepID: "2", Rank: 6, World: 7, LocalRank: 0, LocalWorld: 1, Node: 3,
		Nodes: []string{"gpu07", "gpu08", "gpu09", "gpu12"}}
	if !ok || err != nil || !reflect.DeepEqual(task, want) {
		t.Fatalf("TaskFromLookup = %+v, %v, %v; want %+v", task, ok, err, want)
	}
	if task.MasterAddr() != "gpu07" || task.MasterPort() != PortBase+(812342%PortSpan) {
		t.Fatalf("master %s:%d", task.MasterAddr(), task.MasterPort())
	}
	// Without the step's own variables, the job's are used.
	delete(env, "SLURM_STEP_NUM_TASKS")
	delete(env, "SLURM_STEP_TASKS_PER_NODE")
	delete(env, "SLURM_STEP_NODELIST")
	env["SLURM_PROCID"], env["SLURM_LOCALID"] = "7", "1"
	task, _, err = TaskFromLookup(mapLookup(env, nil))
	if err != nil || task.World != 32 || task.LocalWorld != 2 || task.Nodes[0] != "gpu01" || len(task.Nodes) != 16 {
		t.Fatalf("job fallback: %+v, %v", task, err)
	}
}

func TestTaskFromLookupOutsideAStep(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"no Slurm":     {"RANK": "1"},
		"batch script": batchStep,
		"salloc shell": {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "vm", "SLURM_NTASKS": "3", "SLURM_TASKS_PER_NODE": "3"},
	} {
		if task, ok, err := TaskFromLookup(mapLookup(env, nil)); ok || err != nil {
			t.Errorf("%s: TaskFromLookup = %+v, %v, %v; want not a task", name, task, ok, err)
		}
	}
}

func TestTaskFromLookupReportsEveryProblem(t *testing.T) {
	env := maps.Clone(srunTask1)
	env["SLURM_PROCID"] = "x"
	env["SLURM_STEP_NODELIST"] = "n[2-1]"
	_, ok, err := TaskFromLookup(mapLookup(env, nil))
	if !ok || err == nil || !strings.Contains(err.Error(), "SLURM_PROCID") || !strings.Contains(err.Error(), "SLURM_STEP_NODELIST") ||
		!errors.Is(err, ErrHostList) {
		t.Fatalf("err = %v, want both variables named", err)
	}
	for edit, want := range map[string]string{
		"SLURM_PROCID=4":                 "SLURM_PROCID=4 is not below the step's 4 tasks",
		"SLURM_NODEID=1":                 "SLURM_NODEID=1 is not below the 1 nodes",
		"SLURM_LOCALID=4":                "SLURM_LOCALID=4 is not below the 4 tasks on this node",
		"SLURM_STEP_TASKS_PER_NODE=2(x)": "SLURM_STEP_TASKS_PER_NODE",
		"SLURM_STEP_NUM_TASKS=0":         "positive number",
		"SLURM_LOCALID=-1":               "SLURM_LOCALID=\"-1\" is not a non-negative integer",
	} {
		env := maps.Clone(srunTask1)
		name, value, _ := strings.Cut(edit, "=")
		env[name] = value
		if _, _, err := TaskFromLookup(mapLookup(env, nil)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want mention of %q", edit, err, want)
		}
	}
	env = maps.Clone(srunTask1)
	delete(env, "SLURM_STEP_NUM_TASKS")
	delete(env, "SLURM_NTASKS")
	delete(env, "SLURM_NPROCS")
	if _, _, err := TaskFromLookup(mapLookup(env, nil)); err == nil || !strings.Contains(err.Error(), "SLURM_STEP_NUM_TASKS") {
		t.Errorf("no task count: %v", err)
	}
}

func TestEveryNameIsAskedWhateverIsSet(t *testing.T) {
	for _, env := range []map[string]string{nil, srunTask1, batchStep} {
		asked := map[string]bool{}
		TaskFromLookup(mapLookup(env, asked))
		if got, want := slices.Sorted(maps.Keys(asked)), slices.Sorted(slices.Values(TaskNames())); !slices.Equal(got, want) {
			t.Errorf("task: asked %q, TaskNames() %q", got, want)
		}
		asked = map[string]bool{}
		AllocationFromLookup(mapLookup(env, asked))
		if got, want := slices.Sorted(maps.Keys(asked)), slices.Sorted(slices.Values(allocationNames)); !slices.Equal(got, want) {
			t.Errorf("allocation: asked %q, allocationNames %q", got, want)
		}
	}
}

func TestMasterPortSeparatesJobsAndSteps(t *testing.T) {
	seen := map[int]string{}
	for job := range 100 {
		for step := range 10 {
			tk := Task{JobID: string(rune('0'+job/10)) + string(rune('0'+job%10)), StepID: string(rune('0' + step))}
			p := tk.MasterPort()
			if p < PortBase || p >= PortBase+PortSpan {
				t.Fatalf("port %d outside the range", p)
			}
			if prev, dup := seen[p]; dup {
				t.Fatalf("%s and %s share port %d", prev, tk.Name(), p)
			}
			seen[p] = tk.Name()
		}
	}
	named := Task{JobID: "12", StepID: "batch"}
	if p := named.MasterPort(); p < PortBase || p >= PortBase+PortSpan || p != named.MasterPort() {
		t.Fatalf("named step port %d", p)
	}
}

func TestAllocationFromLookup(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		want Allocation
	}{
		"salloc -n 3": {
			map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "vm", "SLURM_NTASKS": "3", "SLURM_TASKS_PER_NODE": "3"},
			Allocation{JobID: "7", Nodes: []string{"vm"}, Tasks: []int{3}, NTasks: 3},
		},
		"batch script": {batchStep, Allocation{JobID: "4", Nodes: []string{"vm"}, Tasks: []int{3}, NTasks: 3}},
		"uneven nodes": {
			map[string]string{"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "n[1-3],m1", "SLURM_TASKS_PER_NODE": "2(x3),1", "SLURM_NTASKS": "7"},
			Allocation{JobID: "9", Nodes: []string{"n1", "n2", "n3", "m1"}, Tasks: []int{2, 2, 2, 1}, NTasks: 7},
		},
		"nodes only (salloc -N 2)": {
			map[string]string{"SLURM_JOBID": "10", "SLURM_NODELIST": "n[1-2]"},
			Allocation{JobID: "10", Nodes: []string{"n1", "n2"}, Tasks: []int{1, 1}, NTasks: 2},
		},
		"--ntasks-per-node without the list": {
			map[string]string{"SLURM_JOB_ID": "11", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NTASKS_PER_NODE": "4"},
			Allocation{JobID: "11", Nodes: []string{"n1", "n2"}, Tasks: []int{4, 4}, NTasks: 8},
		},
		"fewer tasks than the list holds": {
			map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2,1", "SLURM_NTASKS": "2"},
			Allocation{JobID: "12", Nodes: []string{"n1", "n2"}, Tasks: []int{2, 1}, NTasks: 2},
		},
	} {
		a, ok, err := AllocationFromLookup(mapLookup(tc.env, nil))
		if !ok || err != nil || !reflect.DeepEqual(a, tc.want) {
			t.Errorf("%s: AllocationFromLookup = %+v, %v, %v; want %+v", name, a, ok, err, tc.want)
		}
	}
	for step, inStep := range map[string]bool{"": false, InteractiveStep: false, "0": true, "batch": true} {
		env := map[string]string{"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n1"}
		if step != "" {
			env["SLURM_STEPID"] = step
		}
		if a, _, err := AllocationFromLookup(mapLookup(env, nil)); err != nil || a.Step != step || a.InStep() != inStep {
			t.Errorf("step %q: %+v, %v; want InStep %v", step, a, err, inStep)
		}
	}
	if a, ok, err := AllocationFromLookup(mapLookup(map[string]string{"SLURM_NTASKS": "4"}, nil)); ok || err != nil {
		t.Errorf("outside a job: %+v, %v, %v", a, ok, err)
	}
	for name, env := range map[string]map[string]string{
		"SLURM_TASKS_PER_NODE":  {"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x3)"},
		"n[2-1]":                {"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n[2-1]"},
		"SLURM_NTASKS=5":        {"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_NTASKS": "5"},
		"SLURM_NTASKS=\"four\"": {"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n1", "SLURM_NTASKS": "four"},
	} {
		if _, ok, err := AllocationFromLookup(mapLookup(env, nil)); !ok || err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("AllocationFromLookup(%v) = %v, want mention of %s", env, err, name)
		}
	}
}

// allocationNames is every variable AllocationFromLookup asks for.
var allocationNames = []string{EnvJobID, EnvJobIDOld, EnvJobNodeList, EnvNodeList, EnvTasksPerNode, EnvNTasksPerNode, EnvNTasks, EnvNProcs, EnvStepID, EnvStepIDOld}

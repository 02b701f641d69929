package slurm

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
)

// The Slurm environment variables this package reads. Where Slurm sets an
// older spelling as well (SLURM_JOBID, SLURM_NODELIST, SLURM_NPROCS,
// SLURM_STEPID), the older one is read when the newer is unset.
const (
	EnvJobID            = "SLURM_JOB_ID"
	EnvJobIDOld         = "SLURM_JOBID"
	EnvJobNodeList      = "SLURM_JOB_NODELIST"
	EnvNodeList         = "SLURM_NODELIST"
	EnvTasksPerNode     = "SLURM_TASKS_PER_NODE"
	EnvNTasksPerNode    = "SLURM_NTASKS_PER_NODE"
	EnvNTasks           = "SLURM_NTASKS"
	EnvNProcs           = "SLURM_NPROCS"
	EnvStepID           = "SLURM_STEP_ID"
	EnvStepIDOld        = "SLURM_STEPID"
	EnvProcID           = "SLURM_PROCID"
	EnvLocalID          = "SLURM_LOCALID"
	EnvNodeID           = "SLURM_NODEID"
	EnvStepNumTasks     = "SLURM_STEP_NUM_TASKS"
	EnvStepTasksPerNode = "SLURM_STEP_TASKS_PER_NODE"
	EnvStepNodeList     = "SLURM_STEP_NODELIST"
)

// TaskNames lists every variable TaskFromLookup asks for.
func TaskNames() []string {
	return []string{
		EnvJobID, EnvJobIDOld, EnvStepID, EnvStepIDOld, EnvProcID, EnvLocalID, EnvNodeID, EnvStepNumTasks,
		EnvNTasks, EnvNProcs, EnvStepTasksPerNode, EnvTasksPerNode, EnvStepNodeList, EnvJobNodeList, EnvNodeList,
	}
}

// Allocation is a Slurm job's allocation as its batch script or an
// salloc shell sees it: what a launcher running inside it may use.
type Allocation struct {
	// JobID is SLURM_JOB_ID.
	JobID string
	// Nodes is SLURM_JOB_NODELIST expanded, in Slurm's order.
	Nodes []string
	// Tasks is the number of tasks of each node (len(Nodes) entries):
	// SLURM_TASKS_PER_NODE expanded; else SLURM_NTASKS_PER_NODE on every
	// node; else 1 each.
	Tasks []int
	// NTasks is SLURM_NTASKS, else the sum of Tasks.
	NTasks int
	// Step is SLURM_STEP_ID when this process is a task of a job step
	// (InteractiveStep for salloc's shell with use_interactive_step), ""
	// in a batch script or a plain salloc shell.
	Step string
}

// InteractiveStep is the step id of salloc's shell when Slurm runs it as
// a step (LaunchParameters=use_interactive_step); srun works inside it.
const InteractiveStep = "4294967290"

// InStep reports whether the process runs inside a job step other than
// the interactive one, where a nested srun would wait for the step's own
// CPUs, forever.
func (a Allocation) InStep() bool { return a.Step != "" && a.Step != InteractiveStep }

// lookupFunc finds an environment variable, like os.LookupEnv.
type lookupFunc = func(name string) (string, bool)

// reader looks variables up, first spelling first, and collects every
// malformed one.
type reader struct {
	lookup lookupFunc
	errs   []error
}

// get returns the first of names that is set (every name is looked up,
// so that callers recording lookups see them all).
func (r *reader) get(names ...string) (string, string, bool) {
	var val, name string
	found := false
	for _, n := range names {
		if v, ok := r.lookup(n); ok && !found {
			val, name, found = strings.TrimSpace(v), n, true
		}
	}
	return val, name, found
}

// count reads a non-negative integer; ok is false when no name is set or
// the value is malformed (then an error is recorded).
func (r *reader) count(names ...string) (int, bool) {
	v, name, set := r.get(names...)
	if !set {
		return 0, false
	}
	n, err := parseDigits(v)
	if err != nil || n > 1<<31 {
		r.errs = append(r.errs, fmt.Errorf("%s=%q is not a non-negative integer", name, v))
		return 0, false
	}
	return int(n), true
}

func (r *reader) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// AllocationFromLookup reads the allocation of the Slurm job this process
// runs in, through lookup (os.LookupEnv, say). ok is false, with a nil
// error, outside a Slurm job (no SLURM_JOB_ID or no node list). Malformed
// or inconsistent variables are reported together. It is a pure
// function.
func AllocationFromLookup(lookup func(name string) (string, bool)) (a Allocation, ok bool, err error) {
	r := &reader{lookup: lookup}
	jobID, _, hasJob := r.get(EnvJobID, EnvJobIDOld)
	list, listName, hasList := r.get(EnvJobNodeList, EnvNodeList)
	perNode, perNodeName, hasPerNode := r.get(EnvTasksPerNode)
	uniform, hasUniform := r.count(EnvNTasksPerNode)
	ntasks, hasNTasks := r.count(EnvNTasks, EnvNProcs)
	step, _, _ := r.get(EnvStepID, EnvStepIDOld)
	if !hasJob || !hasList {
		return Allocation{}, false, errors.Join(r.errs...)
	}
	a.JobID, a.Step = jobID, step
	nodes, err := ExpandHostList(list)
	if err != nil {
		r.fail("%s: %w", listName, err)
	}
	a.Nodes = nodes
	switch {
	case hasPerNode:
		tasks, err := ExpandTasksPerNode(perNode)
		if err != nil {
			r.fail("%s: %w", perNodeName, err)
		} else if nodes != nil && len(tasks) != len(nodes) {
			r.fail("%s=%q lists %d nodes but %s has %d", perNodeName, perNode, len(tasks), listName, len(nodes))
		}
		a.Tasks = tasks
	case hasUniform && uniform > 0:
		for range nodes {
			a.Tasks = append(a.Tasks, uniform)
		}
	default:
		for range nodes {
			a.Tasks = append(a.Tasks, 1)
		}
	}
	total := 0
	for _, t := range a.Tasks {
		total += t
	}
	a.NTasks = total
	if hasNTasks {
		if ntasks < 1 || (ntasks > total && len(r.errs) == 0) {
			r.fail("%s=%d does not fit the %d tasks the nodes list", EnvNTasks, ntasks, total)
		}
		a.NTasks = ntasks
	}
	if err := errors.Join(r.errs...); err != nil {
		return Allocation{}, true, fmt.Errorf("slurm: allocation: %w", err)
	}
	return a, true, nil
}

// Task is one task of a Slurm job step (a process srun started): its
// place in the step, from the variables srun gives every task.
type Task struct {
	JobID  string // SLURM_JOB_ID
	StepID string // SLURM_STEP_ID
	// Rank is SLURM_PROCID, World SLURM_STEP_NUM_TASKS (else
	// SLURM_NTASKS).
	Rank, World int
	// LocalRank is SLURM_LOCALID; LocalWorld the step's tasks on this
	// node: SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE) at
	// SLURM_NODEID.
	LocalRank, LocalWorld int
	// Node is SLURM_NODEID, this node's index in Nodes.
	Node int
	// Nodes is the step's node list expanded (SLURM_STEP_NODELIST, else
	// the job's).
	Nodes []string
}

// TaskFromLookup reads this process's place in a Slurm job step through
// lookup. ok is false, with a nil error, unless the process is a task
// started by srun: SLURM_JOB_ID, SLURM_STEP_ID and SLURM_PROCID all set.
// (A batch script has SLURM_PROCID=0 and SLURM_NTASKS, but no step id: it
// is not one of the job's tasks.) Every variable is looked up whatever is
// set. Malformed or inconsistent variables are reported together. It is a
// pure function.
func TaskFromLookup(lookup func(name string) (string, bool)) (t Task, ok bool, err error) {
	r := &reader{lookup: lookup}
	jobID, _, hasJob := r.get(EnvJobID, EnvJobIDOld)
	stepID, _, hasStep := r.get(EnvStepID, EnvStepIDOld)
	_, _, procSet := r.get(EnvProcID)
	rank, hasRank := r.count(EnvProcID)
	local, hasLocal := r.count(EnvLocalID)
	node, hasNode := r.count(EnvNodeID)
	world, hasWorld := r.count(EnvStepNumTasks, EnvNTasks, EnvNProcs)
	perNode, perNodeName, hasPerNode := r.get(EnvStepTasksPerNode, EnvTasksPerNode)
	list, listName, hasList := r.get(EnvStepNodeList, EnvJobNodeList, EnvNodeList)
	if !hasJob || !hasStep || !procSet {
		return Task{}, false, nil
	}
	t = Task{JobID: jobID, StepID: stepID, Rank: rank, LocalRank: local, Node: node, World: world, LocalWorld: 1}
	if !hasRank {
		r.fail("%s is not set correctly", EnvProcID)
	}
	if !hasWorld || world < 1 {
		r.fail("%s (or %s) is not set to a positive number", EnvStepNumTasks, EnvNTasks)
	} else if hasRank && rank >= world {
		r.fail("%s=%d is not below the step's %d tasks", EnvProcID, rank, world)
	}
	if hasList {
		nodes, err := ExpandHostList(list)
		if err != nil {
			r.fail("%s: %w", listName, err)
		}
		t.Nodes = nodes
	} else {
		r.fail("%s (or %s) is not set", EnvStepNodeList, EnvJobNodeList)
	}
	if t.Nodes != nil && node >= len(t.Nodes) {
		r.fail("%s=%d is not below the %d nodes of %s", EnvNodeID, node, len(t.Nodes), listName)
	}
	if hasPerNode {
		tasks, err := ExpandTasksPerNode(perNode)
		switch {
		case err != nil:
			r.fail("%s: %w", perNodeName, err)
		case node >= len(tasks):
			r.fail("%s=%d is not below the %d nodes of %s=%q", EnvNodeID, node, len(tasks), perNodeName, perNode)
		default:
			t.LocalWorld = tasks[node]
		}
	}
	if hasLocal && local >= t.LocalWorld {
		r.fail("%s=%d is not below the %d tasks on this node", EnvLocalID, local, t.LocalWorld)
	}
	if !hasLocal || !hasNode {
		r.fail("%s and %s must be set for a task", EnvLocalID, EnvNodeID)
	}
	if err := errors.Join(r.errs...); err != nil {
		return Task{}, true, fmt.Errorf("slurm: task: %w", err)
	}
	return t, true, nil
}

// Rendezvous defaults of a job step (see Task.MasterPort).
const (
	PortBase = 20000
	PortSpan = 10000
)

// MasterAddr is where rank 0 of the step runs: the first node of the
// step's node list (Slurm's block and cyclic distributions both start
// there).
func (t Task) MasterAddr() string {
	if len(t.Nodes) == 0 {
		return ""
	}
	return t.Nodes[0]
}

// MasterPort is the rendezvous port every task of the step derives alike:
// PortBase + (10·job + step) mod PortSpan, so consecutive jobs, and up to
// ten steps of one job, get different ports. (A job or step id that is
// not a number is hashed.) Two steps that must run at once on one node
// and collide need MASTER_PORT set.
func (t Task) MasterPort() int {
	return PortBase + int((10*idNumber(t.JobID)+idNumber(t.StepID))%PortSpan)
}

// Name is a job id for ringtail's authentication, unique per step:
// "slurm-JOB.STEP".
func (t Task) Name() string { return "slurm-" + t.JobID + "." + t.StepID }

// idNumber is a job or step id as a number; ids that are not numbers
// (Slurm's "batch" and "extern" steps) are hashed.
func idNumber(id string) uint64 {
	if n, err := parseDigits(id); err == nil {
		return n % (1 << 40)
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64() % (1 << 40)
}

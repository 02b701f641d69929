package faults

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// Fault is what a run does to the job.
type Fault string

// The faults.
const (
	FaultNone        Fault = "none"           // a clean run (the baseline)
	FaultKill        Fault = "kill"           // kill -9 of the target when it begins step At
	FaultFreezeShort Fault = "freeze-0.5x"    // SIGSTOP for half the peer timeout, then SIGCONT
	FaultFreezeLong  Fault = "freeze-2x"      // SIGSTOP for twice the peer timeout, then SIGCONT
	FaultSkip        Fault = "skip"           // the target skips collective At
	FaultRoot        Fault = "mismatch-root"  // the target's broadcast At names another root
	FaultDType       Fault = "mismatch-dtype" // the target's allreduce At is int32 (same bytes)
	FaultCount       Fault = "mismatch-count" // the target's allreduce At has one element fewer
	FaultOp          Fault = "mismatch-op"    // the target's allreduce At uses Max instead of Sum
)

// Faults lists the faults a matrix cycles through (FaultNone excluded).
var Faults = []Fault{FaultKill, FaultFreezeShort, FaultFreezeLong, FaultSkip, FaultRoot, FaultDType, FaultCount, FaultOp}

// workerFault is the worker's -fault value for f ("" for external faults).
func (f Fault) workerFault() string {
	switch f {
	case FaultSkip:
		return "skip"
	case FaultRoot:
		return "root"
	case FaultDType:
		return "dtype"
	case FaultCount:
		return "count"
	case FaultOp:
		return "op"
	}
	return ""
}

// external reports whether the harness injects f from outside (signals).
func (f Fault) external() bool {
	return f == FaultKill || f == FaultFreezeShort || f == FaultFreezeLong
}

// Transport is how the ranks of one host talk.
type Transport string

// The transports.
const (
	TransportShm Transport = "shm" // shared memory within the host (the default)
	TransportTCP Transport = "tcp" // TCP even within the host (RINGTAIL_NO_SHM=1 RINGTAIL_NO_UNIX=1)
)

// Scenario is one run.
type Scenario struct {
	Fault       Fault
	Transport   Transport
	NP          int           // ranks
	Target      int           // the rank the fault hits
	At          int           // the step it hits at
	Steps       int           // collectives per rank
	Elems       int           // float32s per collective
	Pace        time.Duration // pause before each step
	PeerTimeout time.Duration // RINGTAIL_PEER_TIMEOUT
}

// String names the scenario in tables and logs.
func (s Scenario) String() string {
	return fmt.Sprintf("%s/%s/np%d/rank%d@%d", s.Fault, s.Transport, s.NP, s.Target, s.At)
}

// Freeze returns how long a freeze fault stops the target.
func (s Scenario) Freeze() time.Duration {
	switch s.Fault {
	case FaultFreezeShort:
		return s.PeerTimeout / 2
	case FaultFreezeLong:
		return 2 * s.PeerTimeout
	}
	return 0
}

// op is the worker's -op for the scenario: broadcasts for a root
// mismatch, allreduces of one shape for the others that need a fixed
// collective (a skipped call followed by one of the same shape is the
// case that used to go unnoticed), a mix otherwise.
func (s Scenario) op() string {
	switch s.Fault {
	case FaultRoot:
		return "broadcast"
	case FaultSkip, FaultDType, FaultCount, FaultOp:
		return "allreduce"
	}
	return "mixed"
}

// Env returns the ranks' environment for the scenario (for --env).
func (s Scenario) Env() []string {
	env := []string{"RINGTAIL_PEER_TIMEOUT=" + s.PeerTimeout.String()}
	if s.Transport == TransportTCP {
		env = append(env, "RINGTAIL_NO_SHM=1", "RINGTAIL_NO_UNIX=1")
	}
	return env
}

// WorkerArgs returns the worker's flags.
func (s Scenario) WorkerArgs() []string {
	a := []string{"-steps", strconv.Itoa(s.Steps), "-elems", strconv.Itoa(s.Elems), "-op", s.op(), "-pace", s.Pace.String()}
	if f := s.Fault.workerFault(); f != "" {
		a = append(a, "-fault", f, "-target", strconv.Itoa(s.Target), "-at", strconv.Itoa(s.At))
	}
	return a
}

// MatrixConfig shapes a matrix of scenarios.
type MatrixConfig struct {
	Runs        int           // scenarios
	Seed        uint64        // picks targets and steps
	NPs         []int         // rank counts to cycle through (default 2, 3, 4, 6, 8)
	Faults      []Fault       // default Faults
	Transports  []Transport   // default shm, tcp
	PeerTimeout time.Duration // default 2 s
	Elems       int           // float32s per collective (default 1<<16: 256 KiB)
}

// Matrix returns cfg.Runs scenarios cycling through every fault, then
// both transports, with the rank count cycling independently (so a run
// count that is a multiple of faults × transports covers each pair), the
// target rank and the step drawn from a generator seeded with cfg.Seed.
func Matrix(cfg MatrixConfig) []Scenario {
	if len(cfg.NPs) == 0 {
		cfg.NPs = []int{2, 3, 4, 6, 8}
	}
	if len(cfg.Faults) == 0 {
		cfg.Faults = Faults
	}
	if len(cfg.Transports) == 0 {
		cfg.Transports = []Transport{TransportShm, TransportTCP}
	}
	if cfg.PeerTimeout == 0 {
		cfg.PeerTimeout = 2 * time.Second
	}
	if cfg.Elems == 0 {
		cfg.Elems = 1 << 16
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	out := make([]Scenario, 0, cfg.Runs)
	for i := range cfg.Runs {
		np := cfg.NPs[i%len(cfg.NPs)]
		at := 8 + rng.IntN(8)
		out = append(out, Scenario{
			Fault:     cfg.Faults[i%len(cfg.Faults)],
			Transport: cfg.Transports[(i/len(cfg.Faults))%len(cfg.Transports)],
			NP:        np, Target: rng.IntN(np), At: at, Steps: at + 40,
			Elems: cfg.Elems, Pace: 5 * time.Millisecond, PeerTimeout: cfg.PeerTimeout,
		})
	}
	return out
}

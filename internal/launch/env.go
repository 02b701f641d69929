package launch

import (
	"fmt"
	"strconv"
	"time"
)

// The environment contract: the variables Run sets for every rank. They
// are the names the root package's ConfigFromEnv reads (a test keeps them
// equal); they are repeated here because this package must not import the
// runtime.
const (
	EnvRank           = "RANK"
	EnvWorldSize      = "WORLD_SIZE"
	EnvLocalRank      = "LOCAL_RANK"
	EnvLocalWorldSize = "LOCAL_WORLD_SIZE"
	EnvMasterAddr     = "MASTER_ADDR"
	EnvMasterPort     = "MASTER_PORT"
	// EnvRingtailAddr and EnvRingtailPort name ringtail's coordinator
	// when MASTER_ADDR and MASTER_PORT are left to torch.
	EnvRingtailAddr = "RINGTAIL_MASTER_ADDR"
	EnvRingtailPort = "RINGTAIL_MASTER_PORT"
	EnvSecret       = "RINGTAIL_SECRET"
	EnvSecretFile   = "RINGTAIL_SECRET_FILE"
	EnvJobID        = "RINGTAIL_JOB_ID"
	EnvCoordinator  = "RINGTAIL_COORDINATOR"
	EnvTimeout      = "RINGTAIL_TIMEOUT"
	EnvControlPlane = "RINGTAIL_CONTROL_PLANE"
	// EnvConnectTimeout is set from Config.StartTimeout.
	EnvConnectTimeout = "RINGTAIL_CONNECT_TIMEOUT"
	// EnvListenIP is set from Config.Interfaces.
	EnvListenIP = "RINGTAIL_LISTEN_IP"
)

// CoordinatorExternal is the value of RINGTAIL_COORDINATOR that tells rank
// 0 not to host the rendezvous.
const CoordinatorExternal = "external"

// reservedEnv reports whether Run always sets name, so that Config.Env may
// not.
func reservedEnv(name string) bool {
	switch name {
	case EnvRank, EnvWorldSize, EnvLocalRank, EnvLocalWorldSize, EnvMasterAddr, EnvMasterPort, EnvRingtailAddr, EnvRingtailPort,
		EnvSecret, EnvSecretFile, EnvJobID, EnvCoordinator, EnvControlPlane:
		return true
	}
	return false
}

// placement is where one rank runs.
type placement struct {
	Rank       int
	Host       string
	LocalRank  int
	LocalWorld int
	Remote     bool
}

// place assigns ranks to hosts: slots give consecutive ranks per host,
// hosts filled in list order, as horovodrun does; when np is below the
// total slots the last hosts get fewer ranks or none. A host's
// LocalWorld is the number of ranks placed on it. An empty host list
// puts np ranks on the launcher host.
func place(np int, hosts []HostSlots, isLocal func(string) bool) []placement {
	if len(hosts) == 0 {
		hosts = []HostSlots{{Host: "localhost", Slots: np}}
	}
	var ps []placement
	for _, h := range hosts {
		remote := !isLocal(h.Host)
		first := len(ps)
		for i := 0; i < h.Slots && len(ps) < np; i++ {
			ps = append(ps, placement{Rank: len(ps), Host: h.Host, LocalRank: i, Remote: remote})
		}
		for i := first; i < len(ps); i++ {
			ps[i].LocalWorld = len(ps) - first
		}
	}
	return ps
}

// jobEnv is what every rank of one job shares.
type jobEnv struct {
	World      int
	MasterAddr string
	MasterPort int
	// TorchAddr and TorchPort, when TorchPort is set, are rank 0's host
	// and a free port there: MASTER_ADDR and MASTER_PORT get them, so a
	// script's torch.distributed (env://) opens its own store there, and
	// ringtail's coordinator moves to RINGTAIL_MASTER_ADDR/PORT.
	TorchAddr string
	TorchPort int
	JobID     string
	Timeout   time.Duration
	Control   string // control plane ("" = the runtime's default)
	// Start is the ranks' connect timeout, RINGTAIL_CONNECT_TIMEOUT (0:
	// unset).
	Start time.Duration
	// MetricsPort and Timeline are Config's (observe.go).
	MetricsPort int
	Timeline    string
}

// rankEnv returns the contract variables of one rank as K=V pairs, the
// secret excepted (it travels separately for remote ranks).
func rankEnv(j jobEnv, p placement) []string {
	env := []string{
		EnvRank + "=" + strconv.Itoa(p.Rank),
		EnvLocalRank + "=" + strconv.Itoa(p.LocalRank),
		EnvLocalWorldSize + "=" + strconv.Itoa(p.LocalWorld),
	}
	env = append(env, jobVars(j)...)
	return append(env, observeEnv(j, p)...)
}

// jobVars returns the contract variables every rank of the job shares,
// the secret excepted.
func jobVars(j jobEnv) []string {
	env := []string{EnvWorldSize + "=" + strconv.Itoa(j.World)}
	if j.TorchPort > 0 {
		env = append(env,
			EnvRingtailAddr+"="+j.MasterAddr, EnvRingtailPort+"="+strconv.Itoa(j.MasterPort),
			EnvMasterAddr+"="+j.TorchAddr, EnvMasterPort+"="+strconv.Itoa(j.TorchPort))
	} else {
		env = append(env, EnvMasterAddr+"="+j.MasterAddr, EnvMasterPort+"="+strconv.Itoa(j.MasterPort))
	}
	env = append(env,
		EnvJobID+"="+j.JobID,
		EnvCoordinator+"="+CoordinatorExternal)
	if j.Timeout > 0 {
		env = append(env, EnvTimeout+"="+j.Timeout.String())
	}
	if j.Control != "" {
		env = append(env, EnvControlPlane+"="+j.Control)
	}
	if j.Start > 0 {
		env = append(env, EnvConnectTimeout+"="+j.Start.String())
	}
	return env
}

// checkEnvName reports whether name can be exported by a POSIX shell.
func checkEnvName(name string) error {
	if name == "" {
		return fmt.Errorf("empty variable name")
	}
	for i, c := range name {
		letter := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return fmt.Errorf("variable name %q is not a shell identifier", name)
		}
	}
	return nil
}

package launch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// The observability variables Run sets when Config.MetricsPort or
// Config.Timeline asks for them (the root package's names; see
// docs/observability.md).
const (
	EnvMetricsAddr = "RINGTAIL_METRICS_ADDR"
	EnvTimeline    = "RINGTAIL_TIMELINE"
)

// observeEnv returns a rank's observability variables: its metrics
// address (port MetricsPort + its local rank; loopback for a local rank,
// every interface for a remote one, so the launcher's dashboard reaches
// it) and the job's timeline path. A remote rank's endpoints then answer
// only requests carrying the job's endpoint token (obs.Token of the job
// secret, which Run always gives the ranks: a random one when none was
// given), as the launcher's dashboard sends it.
func observeEnv(j jobEnv, p placement) []string {
	var env []string
	if j.MetricsPort > 0 {
		host := "127.0.0.1"
		if p.Remote {
			host = "0.0.0.0"
		}
		env = append(env, EnvMetricsAddr+"="+net.JoinHostPort(host, strconv.Itoa(j.MetricsPort+p.LocalRank)))
	}
	if j.Timeline != "" {
		env = append(env, EnvTimeline+"="+j.Timeline)
	}
	return env
}

// MetricsAddrs returns, by rank, where the launcher host reaches each
// rank's metrics when they serve on base + local rank: the same placement
// Run makes (127.0.0.1 for ranks on this host).
func MetricsAddrs(np int, hosts []HostSlots, base int) []string {
	var out []string
	for _, p := range place(np, hosts, IsLocalHost) {
		host := "127.0.0.1"
		if p.Remote {
			host = p.Host
		}
		out = append(out, net.JoinHostPort(host, strconv.Itoa(base+p.LocalRank)))
	}
	return out
}

// CheckMetricsPorts returns an error naming the first rank of this host
// whose metrics port (base + its local rank) is taken now, so that the job
// is refused with one line before any rank starts, instead of that rank
// failing at start-up and its peers being stopped mid-rendezvous.
func CheckMetricsPorts(np int, hosts []HostSlots, base int) error {
	for rank, addr := range MetricsAddrs(np, hosts, base) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" {
			continue // a remote rank's port is checked by that rank
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("--metrics-port %d: port %s (rank %d, the port + its local rank) is in use on this host: choose another port, or leave --metrics-port out with --dashboard (free ports are picked)", base, port, rank)
		}
		ln.Close()
	}
	return nil
}

// FreePortRange returns a base port such that base..base+n−1 are free on
// this host's loopback a moment ago (for --metrics-port's default).
func FreePortRange(n int) (int, error) {
	if n < 1 || n > 4096 {
		return 0, fmt.Errorf("launch: %d ports", n)
	}
	for range 50 {
		base := 20000 + rand.IntN(40000-n)
		free := true
		var open []net.Listener
		for p := base; p < base+n && free; p++ {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				free = false
				break
			}
			open = append(open, ln)
		}
		for _, ln := range open {
			ln.Close()
		}
		if free {
			return base, nil
		}
	}
	return 0, errors.New("launch: no range of free ports found for the ranks' metrics")
}

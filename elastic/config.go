package elastic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/elastic/view"
	"github.com/ringtail-ml/ringtail/internal/envcfg"
	"github.com/ringtail-ml/ringtail/internal/logging"
	"github.com/ringtail-ml/ringtail/internal/settings"

	"github.com/ringtail-ml/ringtail/internal/route"
)

// Environment variables read by ConfigFromEnv (besides ringtail's own,
// which fill Config.Comm, the secret and the job id).
const (
	EnvID           = "RINGTAIL_ELASTIC_ID"            // this slot's id (default: rank-%05d of RANK)
	EnvBind         = "RINGTAIL_ELASTIC_BIND"          // memberlist host:port (default: see ConfigFromEnv)
	EnvSeeds        = "RINGTAIL_ELASTIC_SEEDS"         // comma-separated memberlist addresses
	EnvNP           = "RINGTAIL_ELASTIC_NP"            // ranks the first generation waits for
	EnvMinNP        = "RINGTAIL_ELASTIC_MIN_NP"        // fewest ranks a generation may have
	EnvMaxNP        = "RINGTAIL_ELASTIC_MAX_NP"        // most ranks (0: no limit)
	EnvStartTimeout = "RINGTAIL_ELASTIC_START_TIMEOUT" // e.g. 60s
	EnvMinWait      = "RINGTAIL_ELASTIC_MIN_WAIT"      // how long to wait below min-np for joins
	// EnvElastic is set to 1 for the ranks of an elastic job (ringtail run
	// --elastic): a program that runs either way (ringtail-train) takes it
	// as its --elastic.
	EnvElastic = "RINGTAIL_ELASTIC"
)

// ExitEvicted is the exit status with which a process asks its
// supervisor to restart it (EX_TEMPFAIL: "try again"), e.g. a rank that
// leaves the job as a persistent straggler to come back on a fresh
// process (AntDT's KILL_RESTART). A Supervisor always restarts it.
const ExitEvicted = 75

// ExitJobLost is the exit status of a rank that cannot go on because the
// job cannot: it stayed below min-np for MinWait (ErrBelowMinNP), never
// reached min-np at start-up (ErrStartTimeout), or found the job's state
// gone (every rank that held it died). A Supervisor never restarts it, and
// `ringtail run --elastic` fails the job with it.
const ExitJobLost = 79

// Timers are the failure detector's and the driver's timers. The defaults
// notice a killed or frozen process in well under a second on loopback
// (docs/elastic.md has the measurements); memberlist's LAN defaults take
// about five.
type Timers struct {
	// ProbeInterval is how often each node probes one other node; a probe
	// unanswered within ProbeTimeout is retried indirectly and over TCP
	// until the end of the interval, then the node is suspected.
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	// SuspicionMult × ProbeInterval (× log10 n for large n) is how long a
	// suspected node has to refute before it is declared dead;
	// SuspicionMaxTimeoutMult bounds the stretch memberlist applies while
	// too few peers confirm.
	SuspicionMult           int
	SuspicionMaxTimeoutMult int
	// AwarenessMaxMultiplier bounds how far a node that is itself slow to
	// answer stretches its probe timeouts (Lifeguard).
	AwarenessMaxMultiplier int
	// GossipInterval and GossipNodes: how often, and to how many nodes,
	// membership changes are gossiped.
	GossipInterval time.Duration
	GossipNodes    int
	// PushPullInterval is the full state exchange period (it also carries
	// the adopted view, healing a lost proposal).
	PushPullInterval time.Duration
	// TCPTimeout bounds memberlist's TCP dials and proposal sends.
	TCPTimeout time.Duration
	// Tick is the driver's clock tick; Resend how often a proposer re-sends
	// a view that has not formed; Rejoin how often seeds that are not
	// members are joined again (healing a split start).
	Tick, Resend, Rejoin time.Duration
}

// DefaultTimers returns the timers tuned for detection in ≤ 1 s on a LAN.
func DefaultTimers() Timers {
	return Timers{
		ProbeInterval: 100 * time.Millisecond, ProbeTimeout: 50 * time.Millisecond,
		SuspicionMult: 3, SuspicionMaxTimeoutMult: 2, AwarenessMaxMultiplier: 4,
		GossipInterval: 30 * time.Millisecond, GossipNodes: 4, PushPullInterval: 2 * time.Second,
		TCPTimeout: 2 * time.Second,
		Tick:       25 * time.Millisecond, Resend: 250 * time.Millisecond, Rejoin: time.Second,
	}
}

func (t Timers) validate() error {
	if t.ProbeInterval <= 0 || t.ProbeTimeout <= 0 || t.ProbeTimeout > t.ProbeInterval {
		return fmt.Errorf("probe timeout %v and interval %v must be positive, timeout ≤ interval", t.ProbeTimeout, t.ProbeInterval)
	}
	if t.SuspicionMult < 1 || t.SuspicionMaxTimeoutMult < 1 || t.AwarenessMaxMultiplier < 1 || t.GossipNodes < 1 {
		return errors.New("suspicion multipliers, awareness multiplier and gossip nodes must be at least 1")
	}
	if t.GossipInterval <= 0 || t.PushPullInterval <= 0 || t.TCPTimeout <= 0 || t.Tick <= 0 || t.Resend <= 0 || t.Rejoin <= 0 {
		return errors.New("gossip, push-pull, TCP, tick, resend and rejoin intervals must be positive")
	}
	return nil
}

// Clock tells the time; tests inject a fake one. The default is the wall
// clock.
type Clock interface{ Now() time.Time }

type wallClock struct{}

// Now implements Clock.
func (wallClock) Now() time.Time { return time.Now() }

// Config configures a Worker.
type Config struct {
	// ID names this process's slot (e.g. "rank-00003"); the node name is
	// the ID plus a random incarnation suffix, so a restarted process is a
	// new node. At start-up ranks follow name order.
	ID string
	// JobID and Secret identify and authenticate the job. The secret keys
	// memberlist's encryption (MemberlistKey), the rendezvous and the data
	// plane; at least 16 bytes.
	JobID  string
	Secret []byte
	// BindAddr and BindPort are where memberlist listens (port 0: any);
	// AdvertiseAddr, if set, is the IP peers reach this node on, else
	// BindAddr. That IP also hosts the rendezvous this node proposes and,
	// unless Comm.ListenIP is set, the data plane.
	BindAddr      string
	BindPort      int
	AdvertiseAddr string
	// Seeds are memberlist addresses (host:port) of other nodes; a node
	// that reaches none waits to be reached.
	Seeds []string
	// InitialNP is how many nodes the first generation waits for (the
	// start-up barrier; 0: MinNP). MinNP is the fewest ranks a generation
	// may have; below it the job waits up to MinWait for joins, then fails
	// with ErrBelowMinNP. MaxNP (0: no limit) is the most; extra nodes wait
	// as standbys.
	InitialNP, MinNP, MaxNP int
	// StartTimeout bounds the start-up wait for InitialNP nodes (then MinNP
	// suffice; with fewer Join fails with ErrStartTimeout).
	StartTimeout time.Duration
	MinWait      time.Duration
	// FormTimeout bounds forming one generation's communicator.
	FormTimeout time.Duration
	// EvidenceTTL, JoinSettle and RetryBackoff: see view.Config.
	EvidenceTTL, JoinSettle, RetryBackoff time.Duration
	// Timers tune failure detection.
	Timers Timers
	// Comm is the template for every generation's communicator (timeouts,
	// channels, chunking, logger); Rank, WorldSize, Generation, the
	// rendezvous address, JobID and Secret are filled in per generation.
	Comm ringtail.Config
	// Logger receives membership events.
	Logger zerolog.Logger
	// Clock is the decider's time source (nil: the wall clock).
	Clock Clock
}

// DefaultConfig returns a Config with every tunable at its default.
func DefaultConfig(id, jobID string, secret []byte) Config {
	comm := ringtail.DefaultConfig(0, 1)
	comm.PeerTimeout = 2 * time.Second
	comm.ConnectTimeout = 10 * time.Second
	return Config{
		ID: id, JobID: jobID, Secret: secret, BindAddr: "127.0.0.1",
		MinNP: 1, StartTimeout: time.Minute, MinWait: time.Minute, FormTimeout: 10 * time.Second,
		EvidenceTTL: 3 * time.Second, JoinSettle: 100 * time.Millisecond, RetryBackoff: 500 * time.Millisecond,
		Timers: DefaultTimers(), Comm: comm, Logger: zerolog.Nop(),
	}
}

// ConfigFromEnv reads the ringtail environment (ringtail.ConfigFromEnv:
// secret, job id, timeouts), the RINGTAIL_ELASTIC_* variables and the log
// settings (internal/logging: RINGTAIL_LOG_LEVEL, RINGTAIL_LOG_FORMAT;
// the logger writes to stderr) over DefaultConfig. Without
// RINGTAIL_ELASTIC_BIND, memberlist binds a free port of
// RINGTAIL_LISTEN_IP if set, else of this host's address that routes to
// the first seed (127.0.0.1 for a loopback seed or none): what a rank
// started on another host by `ringtail run --elastic` needs.
func ConfigFromEnv() (Config, error) {
	comm, err := ringtail.ConfigFromEnv()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	id := os.Getenv(EnvID)
	if id == "" {
		id = fmt.Sprintf("rank-%05d", comm.Rank)
	}
	c := DefaultConfig(id, comm.JobID, comm.Secret)
	// One logger (RINGTAIL_LOG_LEVEL, default warn) for membership and
	// every generation's communicator, so refusals show by default.
	log, err := logging.FromEnv(os.Stderr)
	if err != nil {
		errs = append(errs, err)
	}
	c.Logger = log.With().Str("id", id).Logger()
	comm.Logger = c.Logger
	comm.Rank, comm.WorldSize, comm.LocalRank, comm.LocalWorldSize = 0, 1, 0, 1
	if _, ok := os.LookupEnv(ringtail.EnvPeerTimeout); !ok {
		comm.PeerTimeout = c.Comm.PeerTimeout
	}
	if _, ok := os.LookupEnv(ringtail.EnvConnectTimeout); !ok {
		comm.ConnectTimeout = c.Comm.ConnectTimeout
	}
	c.Comm = comm
	if v := os.Getenv(EnvBind); v != "" {
		host, port, err := net.SplitHostPort(v)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not host:port", EnvBind, v))
		} else {
			c.BindAddr, c.BindPort = host, p
		}
	}
	if v := os.Getenv(EnvSeeds); v != "" {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.Seeds = append(c.Seeds, s)
			}
		}
	}
	if os.Getenv(EnvBind) == "" {
		switch {
		case comm.ListenIP != "":
			c.BindAddr = comm.ListenIP
		case len(c.Seeds) > 0:
			c.BindAddr = ipToward(c.Seeds[0])
		}
	}
	var env envcfg.Reader
	env.Int(EnvNP, &c.InitialNP)
	env.Int(EnvMinNP, &c.MinNP)
	env.Int(EnvMaxNP, &c.MaxNP)
	env.Duration(EnvStartTimeout, &c.StartTimeout)
	env.Duration(EnvMinWait, &c.MinWait)
	errs = append(errs, env.Err())
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("elastic: environment: %w", err)
	}
	return c, nil
}

// ipToward returns this host's IP that routes to the host of addr
// (host:port; no packet is sent), or 127.0.0.1 when addr is a loopback
// address or no route is known.
func ipToward(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || ip.IsLoopback() {
		return "127.0.0.1"
	}
	// An IP literal: nothing to resolve, the kernel answers at once.
	local, err := route.LocalIP(context.Background(), ip.String())
	if err != nil {
		return "127.0.0.1"
	}
	return local.String()
}

// MinSecretLen is the shortest job secret accepted (the runtime's,
// settings.MinSecretLen).
const MinSecretLen = settings.MinSecretLen

// Validate reports every unusable field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := view.ValidateName(c.ID); err != nil || len(c.ID) > view.MaxNameLen-17 || isObserver(c.ID) {
		bad("id %q must be 1..%d printable bytes without spaces, not starting with %q", c.ID, view.MaxNameLen-17, ObserverPrefix)
	}
	if c.JobID == "" || len(c.JobID) > 128 {
		bad("job id must be 1..128 bytes")
	}
	if err := settings.CheckSecret(c.Secret); err != nil {
		errs = append(errs, err)
	}
	if err := checkBind(c); err != nil {
		errs = append(errs, err)
	}
	for _, s := range c.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			bad("seed %q is not host:port", s)
		}
	}
	if c.FormTimeout <= 0 {
		bad("form timeout %v must be positive", c.FormTimeout)
	}
	if err := c.Timers.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.deciderConfig("x").Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("elastic: invalid config: %w", err)
	}
	return nil
}

// checkBind reports unusable memberlist bind and advertise addresses.
func checkBind(c *Config) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if net.ParseIP(c.BindAddr) == nil {
		bad("bind address %q is not an IP", c.BindAddr)
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		bad("advertise address %q is not an IP", c.AdvertiseAddr)
	}
	if ip := net.ParseIP(c.BindAddr); c.AdvertiseAddr == "" && ip != nil && ip.IsUnspecified() {
		bad("bind address %s needs an advertise address", c.BindAddr)
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		bad("bind port %d outside 0..65535", c.BindPort)
	}
	return errors.Join(errs...)
}

func (c *Config) deciderConfig(self string) view.Config {
	return view.Config{
		Self: self, MinNP: c.MinNP, MaxNP: c.MaxNP, InitialNP: c.InitialNP,
		StartTimeout: c.StartTimeout, MinWait: c.MinWait, EvidenceTTL: c.EvidenceTTL,
		JoinSettle: c.JoinSettle, FormTimeout: c.FormTimeout, RetryBackoff: c.RetryBackoff,
	}
}

// advertiseIP is the IP peers reach this node on.
func (c *Config) advertiseIP() string {
	if c.AdvertiseAddr != "" {
		return c.AdvertiseAddr
	}
	return c.BindAddr
}

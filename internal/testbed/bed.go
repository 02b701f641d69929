package testbed

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// MaxHosts bounds Config.Hosts.
const MaxHosts = 64

// DefaultSubnet is the hosts' subnet when Config.Subnet is not set. Each
// bed is a network of its own, so parallel beds may share it.
var DefaultSubnet = netip.MustParsePrefix("10.77.0.0/24")

// Config describes a bed.
type Config struct {
	// Hosts is the number of host namespaces, 1..MaxHosts.
	Hosts int
	// Subnet holds the addresses (IPv4); zero: DefaultSubnet.
	Subnet netip.Prefix
	// Addrs, if set, are the hosts' addresses, one per host, inside
	// Subnet; empty: the subnet's first addresses (.1, .2, ...).
	Addrs []netip.Addr
	// Hub is the hub's address on the bridge; zero: the subnet's last
	// usable address (.254 of a /24).
	Hub netip.Addr
	// Logger receives a debug line per command run; zero: discarded.
	Logger zerolog.Logger
}

// withDefaults fills in the subnet and the addresses.
func (c Config) withDefaults() Config {
	if !c.Subnet.IsValid() {
		c.Subnet = DefaultSubnet
	}
	c.Subnet = c.Subnet.Masked()
	if len(c.Addrs) == 0 && c.Hosts > 0 && c.Hosts <= MaxHosts {
		a := c.Subnet.Addr()
		for range c.Hosts {
			a = a.Next()
			c.Addrs = append(c.Addrs, a)
		}
	}
	if !c.Hub.IsValid() && c.Subnet.Addr().Is4() && c.Subnet.Bits() <= 30 {
		b := c.Subnet.Addr().As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		v |= (1<<(32-c.Subnet.Bits()) - 1) &^ 1 // broadcast - 1
		c.Hub = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return c
}

// Validate reports every invalid field (of the config with its defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Hosts < 1 || c.Hosts > MaxHosts {
		bad("hosts %d must be in 1..%d", c.Hosts, MaxHosts)
	}
	if !c.Subnet.Addr().Is4() || c.Subnet.Bits() > 30 {
		bad("subnet %v must be IPv4 with at least 2 host bits", c.Subnet)
	}
	if len(c.Addrs) != c.Hosts {
		bad("%d addresses for %d hosts", len(c.Addrs), c.Hosts)
	}
	seen := map[netip.Addr]bool{}
	usable := func(a netip.Addr) bool {
		if !c.Subnet.Contains(a) || a == c.Subnet.Addr() {
			return false
		}
		return a.Next().IsValid() && c.Subnet.Contains(a.Next()) // not the broadcast address
	}
	for _, a := range append([]netip.Addr{c.Hub}, c.Addrs...) {
		if !usable(a) {
			bad("address %v is not a host address of %v", a, c.Subnet)
		}
		if seen[a] {
			bad("address %v is given twice", a)
		}
		seen[a] = true
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("testbed: invalid config: %w", err)
	}
	return nil
}

// Host is one host of a bed.
type Host struct {
	// Name is the network namespace's name, also the host name for
	// `ringtail run -H` with `--ssh "ip netns exec"`.
	Name string
	// Addr is the address of its interface eth0.
	Addr netip.Addr
}

// Bed is a built test bed. Its methods may be called from any goroutine.
type Bed struct {
	cfg   Config
	name  string
	hub   string
	hosts []Host

	mu      sync.Mutex
	proxies map[int]*proxy // by host
	links   map[int]Link
	closed  bool
}

// New builds the bed described by cfg: it sweeps stale beds, then creates
// the hub with its bridge and the hosts with their veth pairs and
// addresses. On failure it removes what it built.
func New(ctx context.Context, cfg Config) (*Bed, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if _, err := Sweep(ctx); err != nil {
		cfg.Logger.Warn().Err(err).Msg("testbed: sweeping stale beds")
	}
	existing, err := listNetns(ctx)
	if err != nil {
		return nil, err
	}
	var name string
	for name == "" || slices.ContainsFunc(existing, func(n string) bool { return strings.HasPrefix(n, name+"-") }) {
		if name, err = newBedName(); err != nil {
			return nil, err
		}
	}
	b := &Bed{cfg: cfg, name: name, hub: name + "-hub", proxies: map[int]*proxy{}, links: map[int]Link{}}
	for i, a := range cfg.Addrs {
		b.hosts = append(b.hosts, Host{Name: name + "-h" + strconv.Itoa(i), Addr: a})
	}
	if err := b.build(ctx); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return b, nil
}

func (b *Bed) build(ctx context.Context) error {
	bits := strconv.Itoa(b.cfg.Subnet.Bits())
	steps := [][]string{
		{"ip", "netns", "add", b.hub},
		{"ip", "-n", b.hub, "link", "set", "lo", "up"},
		{"ip", "-n", b.hub, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", b.hub, "addr", "add", b.cfg.Hub.String() + "/" + bits, "dev", "br0"},
		{"ip", "-n", b.hub, "link", "set", "br0", "up"},
	}
	for i, h := range b.hosts {
		port := hubPort(i)
		steps = append(steps,
			[]string{"ip", "netns", "add", h.Name},
			[]string{"ip", "-n", h.Name, "link", "set", "lo", "up"},
			[]string{"ip", "-n", b.hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h.Name},
			[]string{"ip", "-n", b.hub, "link", "set", port, "master", "br0"},
			[]string{"ip", "-n", b.hub, "link", "set", port, "up"},
			[]string{"ip", "-n", h.Name, "addr", "add", h.Addr.String() + "/" + bits, "dev", "eth0"},
			[]string{"ip", "-n", h.Name, "link", "set", "eth0", "up"},
		)
	}
	for _, argv := range steps {
		if err := b.run(ctx, argv...); err != nil {
			return err
		}
	}
	return nil
}

// hubPort names host i's bridge port in the hub.
func hubPort(i int) string { return "p" + strconv.Itoa(i) }

// run runs one command and returns its error with its output.
func (b *Bed) run(ctx context.Context, argv ...string) error {
	return b.runInput(ctx, "", argv...)
}

func (b *Bed) runInput(ctx context.Context, input string, argv ...string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if input != "" {
		cmd.Stdin = strings.NewReader(input)
	}
	out, err := cmd.CombinedOutput()
	b.cfg.Logger.Debug().Strs("argv", argv).Err(err).Msg("testbed: run")
	if err != nil {
		return fmt.Errorf("testbed: %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Name is the bed's name, the prefix of its namespaces' names.
func (b *Bed) Name() string { return b.name }

// Hosts returns the hosts, by index.
func (b *Bed) Hosts() []Host { return append([]Host(nil), b.hosts...) }

// Host returns host i.
func (b *Bed) Host(i int) Host { return b.hosts[i] }

// HubName is the hub namespace's name.
func (b *Bed) HubName() string { return b.hub }

// HubAddr is the hub's address on the bridge, reachable from every host:
// the MASTER_ADDR of a launcher that runs in the hub.
func (b *Bed) HubAddr() netip.Addr { return b.cfg.Hub }

// HostList returns the hosts as `ringtail run -H` wants them, slots
// ranks per host: "rtb-1-ab12-h0:1,rtb-1-ab12-h1:1,...".
func (b *Bed) HostList(slots int) string {
	parts := make([]string, len(b.hosts))
	for i, h := range b.hosts {
		parts[i] = h.Name + ":" + strconv.Itoa(slots)
	}
	return strings.Join(parts, ",")
}

// RunArgs returns the `ringtail run` flags that start ranks on the bed
// from a launcher running in the hub (HubCommand): the host list with
// slots ranks per host, ip netns exec as the ssh agent, and the hub's
// address as the master address.
func (b *Bed) RunArgs(slots int) []string {
	return []string{"-H", b.HostList(slots), "--ssh", "ip netns exec", "--master-addr", b.cfg.Hub.String()}
}

// Command returns a command that runs name with args in host i's
// namespace (ip netns exec). Its environment is this process's unless
// the caller sets cmd.Env.
func (b *Bed) Command(ctx context.Context, i int, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", b.hosts[i].Name, name}, args...)...)
}

// HubCommand is Command for the hub namespace.
func (b *Bed) HubCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", b.hub, name}, args...)...)
}

// Close stops the proxies, kills every process still running in the
// bed's namespaces and deletes them. It is idempotent.
func (b *Bed) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	proxies := b.proxies
	b.proxies = nil
	b.mu.Unlock()
	for _, p := range proxies {
		p.close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names, err := listNetns(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		if n == b.hub || strings.HasPrefix(n, b.name+"-h") {
			errs = append(errs, deleteNetns(ctx, n))
		}
	}
	return errors.Join(errs...)
}

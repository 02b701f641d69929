package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/straggler/inject"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{Hosts: 4}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v", ok, err)
	}
	c := ok.withDefaults()
	if c.Hub != netip.MustParseAddr("10.77.0.254") || c.Addrs[0] != netip.MustParseAddr("10.77.0.1") || c.Addrs[3] != netip.MustParseAddr("10.77.0.4") {
		t.Fatalf("defaults: hub %v, addrs %v", c.Hub, c.Addrs)
	}
	a := netip.MustParseAddr
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Hosts: 0}, "hosts 0 must be in"},
		{Config{Hosts: 2, Subnet: netip.MustParsePrefix("fd00::/64")}, "must be IPv4"},
		{Config{Hosts: 2, Addrs: []netip.Addr{a("10.77.0.9")}}, "1 addresses for 2 hosts"},
		{Config{Hosts: 2, Addrs: []netip.Addr{a("10.77.0.9"), a("10.78.0.1")}}, "10.78.0.1 is not a host address"},
		{Config{Hosts: 2, Addrs: []netip.Addr{a("10.77.0.9"), a("10.77.0.9")}}, "given twice"},
		{Config{Hosts: 1, Addrs: []netip.Addr{a("10.77.0.255")}}, "10.77.0.255 is not a host address"},
		{Config{Hosts: 1, Hub: a("10.77.0.1")}, "10.77.0.1 is given twice"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestLinkValidate(t *testing.T) {
	for _, l := range []Link{{Rate: -1}, {Rate: 10}, {Delay: -time.Second}, {Delay: time.Millisecond, Jitter: 2 * time.Millisecond}, {Loss: 1}, {Loss: -0.1}} {
		if l.Validate() == nil {
			t.Errorf("Validate(%+v) = nil", l)
		}
	}
	if err := (Link{Rate: 50e6, Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.01}).Validate(); err != nil {
		t.Error(err)
	}
}

// echoServer runs, in host i, a TCP server that echoes every connection
// (a shell-free helper: socat or nc may be missing). It returns its
// address.
func echoServer(t *testing.T, b *Bed, i int) netip.AddrPort {
	t.Helper()
	var ln net.Listener
	if err := inNetns(b.Host(i).Name, func() (err error) {
		ln, err = net.Listen("tcp4", b.Host(i).Addr.String()+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// dialFrom connects from host i to addr.
func dialFrom(t *testing.T, b *Bed, i int, addr netip.AddrPort) net.Conn {
	t.Helper()
	var c net.Conn
	if err := inNetns(b.Host(i).Name, func() (err error) {
		c, err = net.DialTimeout("tcp4", addr.String(), 10*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends n bytes through an echo connection and reads them back.
func roundTrip(t *testing.T, c net.Conn, n int) time.Duration {
	t.Helper()
	msg := bytes.Repeat([]byte("x"), n)
	start := time.Now()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echo returned other bytes")
	}
	return time.Since(start)
}

func TestBedConnectsHostsThroughTheBridgeAndCleansUp(t *testing.T) {
	b := ForTest(t, false, Config{Hosts: 3})
	names := map[string]bool{}
	for _, h := range b.Hosts() {
		names[h.Name] = true
	}
	// Every host reaches every other host and the hub.
	srv := echoServer(t, b, 2)
	for i := range 2 {
		roundTrip(t, dialFrom(t, b, i, srv), 1000)
	}
	out, err := b.HubCommand(context.Background(), "ip", "-br", "addr", "show", "dev", "br0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), b.HubAddr().String()) {
		t.Fatalf("hub: %s %v", out, err)
	}
	// Processes run in the host's namespace.
	out, err = b.Command(context.Background(), 1, "ip", "-br", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), b.Host(1).Addr.String()+"/24") {
		t.Fatalf("host 1: %s %v", out, err)
	}
	// A process left running in a host is killed by Close, and the
	// namespaces are gone.
	sleeper := b.Command(context.Background(), 0, "sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sleeper.Wait(); err == nil {
		t.Fatal("the process in the bed outlived Close")
	}
	left, _ := listNetns(context.Background())
	for _, n := range left {
		if names[n] || n == b.HubName() {
			t.Fatalf("namespace %s left after Close", n)
		}
	}
}

func TestSweepRemovesBedsOfDeadProcessesOnly(t *testing.T) {
	live := ForTest(t, false, Config{Hosts: 1}) // New sweeps: build it first
	ctx := context.Background()
	// A namespace named like a bed of a process that has exited, and one
	// of a running process (this one is skipped by Sweep: it is ours).
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("rtb-%d-beef-h0", dead.Process.Pid)
	other := "rtbx-not-a-bed"
	for _, n := range []string{stale, other} {
		if out, err := exec.Command("ip", "netns", "add", n).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		t.Cleanup(func() { exec.Command("ip", "netns", "delete", n).Run() })
	}
	swept, err := Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 1 || swept[0] != stale {
		t.Fatalf("Sweep removed %v, want [%s]", swept, stale)
	}
	left, _ := listNetns(ctx)
	if !contains(left, other) || !contains(left, live.Host(0).Name) {
		t.Fatalf("Sweep removed too much: left %v", left)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestProxyDelaysAndStallsTCP(t *testing.T) {
	b := ForTest(t, true, Config{Hosts: 2})
	srv := echoServer(t, b, 1)
	ctx := context.Background()
	plain := roundTrip(t, dialFrom(t, b, 0, srv), 10)
	if err := b.Stall(1, time.Second); !errors.Is(err, ErrNoProxy) {
		t.Fatalf("Stall without a proxy = %v", err)
	}
	// 40 ms each way on host 1's link: an echo round trip crosses it
	// twice each way (client's request in, reply out).
	if err := b.SetLink(ctx, 1, Link{Delay: 40 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c := dialFrom(t, b, 0, srv)
	delayed := roundTrip(t, c, 10)
	if delayed < 80*time.Millisecond {
		t.Fatalf("round trip through a 40 ms link took %v (%v unshaped)", delayed, plain)
	}
	// Bytes cross intact in volume.
	roundTrip(t, c, 4<<20)
	// A stall holds the next round trip for at least its length.
	if err := b.Stall(1, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := roundTrip(t, c, 10); d < 300*time.Millisecond {
		t.Fatalf("round trip during a 300 ms stall took %v", d)
	}
	// Connections opened by the proxied host go through it as well.
	back := echoServer(t, b, 0)
	if d := roundTrip(t, dialFrom(t, b, 1, back), 10); d < 80*time.Millisecond {
		t.Fatalf("round trip from the delayed host took %v", d)
	}
}

func TestDisconnectSilencesAHost(t *testing.T) {
	b := ForTest(t, false, Config{Hosts: 2})
	srv := echoServer(t, b, 1)
	c := dialFrom(t, b, 0, srv)
	roundTrip(t, c, 10)
	ctx := context.Background()
	if err := b.Disconnect(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	c.Write([]byte("x"))
	var buf [1]byte
	if _, err := c.Read(buf[:]); err == nil {
		t.Fatal("a disconnected host answered")
	}
	if err := b.Reconnect(ctx, 1); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, dialFrom(t, b, 0, srv), 10)
}

func TestApplyLinksFromTheInjectionLanguage(t *testing.T) {
	b := ForTest(t, true, Config{Hosts: 3})
	spec, err := inject.Parse("link=1:rate=20mbit:delay=30ms:loss=0.5%;link=2:stall=200ms@0s")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	far, _ := inject.Parse("link=3:rate=1g")
	if _, err := ApplyLinks(ctx, b, far, 4, func(r int) int { return r }); err == nil {
		t.Fatal("rank 3 has no host, yet ApplyLinks succeeded")
	}
	a, err := ApplyLinks(ctx, b, spec, 3, func(r int) int { return r })
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if got := b.Link(1); got != (Link{Rate: 20e6, Delay: 30 * time.Millisecond, Loss: 0.005}) {
		t.Fatalf("host 1 link %+v", got)
	}
	if !b.Link(2).Proxy {
		t.Fatal("a stalling link has no proxy")
	}
	// The rate is on both ends of host 1's veth, the loss rule in host 1.
	for _, argv := range [][]string{
		{"tc", "-n", b.Host(1).Name, "qdisc", "show", "dev", "eth0"},
		{"tc", "-n", b.HubName(), "qdisc", "show", "dev", "p1"},
	} {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "tbf") || !strings.Contains(string(out), "rate 20Mbit") {
			t.Errorf("%v: %s %v", argv, out, err)
		}
	}
	out, err := b.Command(ctx, 1, "nft", "list", "table", "ip", lossTable).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "numgen random mod 1000000 < 5000") {
		t.Errorf("loss rule: %s %v", out, err)
	}
	// Back to an unshaped link: no qdisc, no loss table.
	if err := b.SetLink(ctx, 1, Link{}); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command("tc", "-n", b.Host(1).Name, "qdisc", "show", "dev", "eth0").CombinedOutput()
	if strings.Contains(string(out), "tbf") {
		t.Errorf("tbf left after SetLink(Link{}): %s", out)
	}
	if err := b.Command(ctx, 1, "nft", "list", "table", "ip", lossTable).Run(); err == nil {
		t.Error("loss table left after SetLink(Link{})")
	}
}

// A proxy set up while connections are open leaves them alone: they keep
// flowing, unproxied, both those the host accepted and those it opened;
// connections opened afterwards go through it.
func TestProxyLeavesConnectionsOpenedBeforeItAlone(t *testing.T) {
	b := ForTest(t, true, Config{Hosts: 2})
	ctx := context.Background()
	in := dialFrom(t, b, 0, echoServer(t, b, 1))  // accepted by host 1
	out := dialFrom(t, b, 1, echoServer(t, b, 0)) // opened by host 1
	roundTrip(t, in, 10)
	roundTrip(t, out, 10)
	if err := b.SetLink(ctx, 1, Link{Delay: 40 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]net.Conn{"accepted": in, "opened": out} {
		msg := []byte("still there")
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("connection %s before the proxy: %v", name, err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
			t.Errorf("connection %s before the proxy: read %q, %v", name, got, err)
		}
	}
	if d := roundTrip(t, dialFrom(t, b, 0, echoServer(t, b, 1)), 10); d < 80*time.Millisecond {
		t.Errorf("a connection opened after the proxy took %v for a round trip through a 40 ms link", d)
	}
}

func TestShaperReplacesTheLinksSpecBySpec(t *testing.T) {
	b := ForTest(t, true, Config{Hosts: 3})
	ctx := context.Background()
	s := NewShaper(b, 3, func(r int) int { return r })
	defer s.Stop()
	if err := s.SetLinks(ctx, "link=0,1:rate=1gbit;link=2:rate=100mbit:stall=1s@step4"); err != nil {
		t.Fatal(err)
	}
	if got := b.Link(2); got != (Link{Rate: 100e6, Proxy: true}) {
		t.Fatalf("host 2 link %+v", got)
	}
	if err := s.Stall(2, 50*time.Millisecond); err != nil {
		t.Fatalf("stall on a proxied host: %v", err)
	}
	// The next spec replaces the whole set: hosts it does not name are
	// unshaped again.
	if err := s.SetLinks(ctx, "link=1:loss=1%"); err != nil {
		t.Fatal(err)
	}
	for h, want := range []Link{{}, {Loss: 0.01}, {}} {
		if got := b.Link(h); got != want {
			t.Errorf("host %d link %+v, want %+v", h, got, want)
		}
	}
	out, _ := exec.Command("tc", "-n", b.Host(0).Name, "qdisc", "show", "dev", "eth0").CombinedOutput()
	if strings.Contains(string(out), "tbf") {
		t.Errorf("host 0 keeps its tbf after a spec that does not name it: %s", out)
	}
	for _, bad := range []string{"slow=2:3x", "link=3:rate=1g", "link=1:rate=fast"} {
		if err := s.SetLinks(ctx, bad); err == nil {
			t.Errorf("SetLinks(%q) succeeded", bad)
		}
	}
	if got := b.Link(1); got != (Link{Loss: 0.01}) {
		t.Errorf("a refused spec changed host 1's link to %+v", got)
	}
	if err := s.Stall(3, time.Second); err == nil {
		t.Error("stall of rank 3 on a 3-rank bed succeeded")
	}
	if err := s.Stall(0, time.Second); !errors.Is(err, ErrNoProxy) {
		t.Errorf("stall on a host without proxy: %v, want ErrNoProxy", err)
	}
}

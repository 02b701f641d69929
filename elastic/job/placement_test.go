package job

import (
	"strings"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/launch"
)

func hosts(t *testing.T, s string) []launch.HostSlots {
	t.Helper()
	if s == "" {
		return nil
	}
	h, err := launch.ParseHosts(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func describe(start []launch.HostSlots, stop []string) string {
	var parts []string
	for _, h := range start {
		parts = append(parts, "+"+h.String())
	}
	for _, h := range stop {
		parts = append(parts, "-"+h)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// The kill/re-add scenario of the test bed, step by step, and the rules
// around it (max-np, blacklisting, hosts that leave and come back,
// finishing).
func TestPlacementScenario(t *testing.T) {
	p := newPlacement(4)
	step := func(what, want string) {
		t.Helper()
		if got := describe(p.actions()); got != want {
			t.Fatalf("%s: got %q, want %q", what, got, want)
		}
	}
	p.discover(hosts(t, "h0:1,h1:1,h2:1"))
	step("start", "+h0:1 +h1:1 +h2:1")
	step("nothing changed", "none")

	// h1's rank crashes: blacklisted, its supervisor stopped.
	p.crashed("h1")
	step("crash", "-h1")
	if n := running(p); n != 2 {
		t.Fatalf("running %d, want 2", n)
	}
	p.ended("h1")
	step("h1 ended; still listed, still blacklisted", "none")

	// Discovery adds h3: it starts; h1 stays out while listed.
	p.discover(hosts(t, "h0:1,h1:1,h2:1,h3:1"))
	step("h3 added", "+h3:1")

	// h1 drops out of the list and comes back: usable again.
	p.discover(hosts(t, "h0:1,h2:1,h3:1"))
	step("h1 gone", "none")
	p.discover(hosts(t, "h0:1,h2:1,h3:1,h1:1"))
	step("h1 back", "+h1:1")

	// max-np 4 is reached: a fifth host waits.
	p.discover(hosts(t, "h0:1,h2:1,h3:1,h1:1,h4:2"))
	step("at max-np", "none")
	// h2 leaves the list: stopped; its slot counts until it ended.
	p.discover(hosts(t, "h0:1,h3:1,h1:1,h4:2"))
	step("h2 dropped", "-h2")
	step("h2 still stopping", "none")
	p.ended("h2")
	step("h2 ended: h4 gets the one free slot", "+h4:1")

	p.finish()
	p.discover(hosts(t, "h0:1,h3:1,h1:1,h4:2,h5:1"))
	p.ended("h0")
	step("finished: nothing starts", "none")
}

func TestPlacementFillsHostsInOrderUpToMaxNP(t *testing.T) {
	for _, c := range []struct {
		max   int
		hosts string
		want  string
	}{
		{1, "a:2,b:2", "+a:1"},
		{3, "a:2,b:2", "+a:2 +b:1"},
		{8, "a:2,b:2", "+a:2 +b:2"},
	} {
		p := newPlacement(c.max)
		p.discover(hosts(t, c.hosts))
		if got := describe(p.actions()); got != c.want {
			t.Errorf("max %d, hosts %s: %s, want %s", c.max, c.hosts, got, c.want)
		}
	}
}

// running returns the slots of the supervisors not told to stop.
func running(p *placement) int {
	n := 0
	for h, s := range p.inUse {
		if !p.stopping[h] {
			n += s
		}
	}
	return n
}

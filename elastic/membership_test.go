package elastic

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"
)

// TestMemberlistDetectionTime measures the failure detector alone with
// the default Timers: n memberlist nodes on loopback, one shut down
// without leaving (it stops answering, as a killed or frozen process
// does); the time until every survivor has declared it dead must be under
// a second (docs/elastic.md records the distribution).
func TestMemberlistDetectionTime(t *testing.T) {
	const n, trials = 4, 5
	var took []time.Duration
	for trial := range trials {
		cfg := DefaultConfig("x", "detect-test", testSecret)
		key, err := MemberlistKey(cfg.Secret, cfg.JobID)
		if err != nil {
			t.Fatal(err)
		}
		var nodes []*memberlist.Memberlist
		var boxes []*mailbox
		for i := range n {
			box := newMailbox()
			c := cfg
			ml, err := memberlist.Create(memberlistConfig(&c, fmt.Sprintf("n%d-%d", trial, i), key, &delegate{box: box, state: &published{}}, zerolog.Nop()))
			if err != nil {
				t.Fatal(err)
			}
			defer ml.Shutdown()
			if i > 0 {
				if _, err := ml.Join([]string{nodes[0].LocalNode().Address()}); err != nil {
					t.Fatal(err)
				}
			}
			nodes = append(nodes, ml)
			boxes = append(boxes, box)
		}
		for deadline := time.Now().Add(5 * time.Second); ; {
			ok := true
			for _, ml := range nodes {
				ok = ok && ml.NumMembers() == n
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the cluster did not converge")
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // a few probe rounds in steady state
		for _, b := range boxes {
			b.take()
		}
		victim := nodes[n-1].LocalNode().Name
		start := time.Now()
		_ = nodes[n-1].Shutdown()
		seen := map[int]bool{}
		for deadline := start.Add(5 * time.Second); len(seen) < n-1; {
			for i, b := range boxes[:n-1] {
				for _, e := range b.take() {
					if e.kind == evDead && e.name == victim {
						seen[i] = true
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("trial %d: only %d of %d survivors declared the node dead after 5s", trial, len(seen), n-1)
			}
			time.Sleep(2 * time.Millisecond)
		}
		took = append(took, time.Since(start))
		for _, ml := range nodes[:n-1] {
			_ = ml.Shutdown()
		}
	}
	slices.Sort(took)
	t.Logf("detection by every survivor (n=%d): min %v, median %v, max %v", n, took[0], took[len(took)/2], took[len(took)-1])
	if took[len(took)-1] > time.Second {
		t.Errorf("slowest detection %v exceeds 1s", took[len(took)-1])
	}
}

func TestMemberlistKeyIsBoundToSecretAndJob(t *testing.T) {
	a, err := MemberlistKey([]byte("secret-one-0123456789"), "job")
	if err != nil || len(a) != 32 {
		t.Fatalf("key %x, %v", a, err)
	}
	b, _ := MemberlistKey([]byte("secret-one-0123456789"), "job")
	c, _ := MemberlistKey([]byte("secret-two-0123456789"), "job")
	d, _ := MemberlistKey([]byte("secret-one-0123456789"), "job2")
	if string(a) != string(b) || string(a) == string(c) || string(a) == string(d) {
		t.Fatal("the key must be a function of secret and job id only")
	}
	if _, err := MemberlistKey(nil, "job"); err == nil {
		t.Fatal("empty secret accepted")
	}
}

// A node with another secret cannot join: memberlist's AES-GCM check
// rejects its packets and streams.
func TestMemberlistRejectsWrongSecret(t *testing.T) {
	good := DefaultConfig("a", "job", testSecret)
	bad := DefaultConfig("b", "job", []byte("another-secret-0123456789"))
	kg, _ := MemberlistKey(good.Secret, good.JobID)
	kb, _ := MemberlistKey(bad.Secret, bad.JobID)
	m1, err := memberlist.Create(memberlistConfig(&good, "a", kg, &delegate{box: newMailbox(), state: &published{}}, zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Shutdown()
	m2, err := memberlist.Create(memberlistConfig(&bad, "b", kb, &delegate{box: newMailbox(), state: &published{}}, zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Shutdown()
	if _, err := m2.Join([]string{m1.LocalNode().Address()}); err == nil {
		t.Fatal("a node with the wrong secret joined")
	}
	if m1.NumMembers() != 1 {
		t.Fatalf("the good node sees %d members", m1.NumMembers())
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, {msgProposal}, []byte("P{"), []byte(`P{"gen":0}`), []byte(`F{"gen":0}`), []byte(`E{}`), []byte("Z{}")} {
		if _, err := decode(b); err == nil {
			t.Errorf("%q decoded", b)
		}
	}
}

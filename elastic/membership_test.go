package elastic

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"
)

// TestMemberlistDetectionTime measures the failure detector alone with
// the default Timers: n memberlist nodes on loopback, one shut down
// without leaving (it stops answering, as a killed or frozen process
// does); every survivor must declare it dead. The time that takes is
// logged (docs/elastic.md records the distribution: under a second on an
// idle machine), not asserted: a loaded CI machine stretches it.
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
		var first string
		for i := range n {
			box := newMailbox()
			c := cfg
			d := newDelegate(fmt.Sprintf("n%d-%d", trial, i), box, &published{})
			ml, err := memberlist.Create(memberlistConfig(&c, d.self, key, d, zerolog.Nop()))
			if err != nil {
				t.Fatal(err)
			}
			defer ml.Shutdown()
			if i == 0 {
				first = d.localAddr()
			} else if _, err := ml.Join([]string{first}); err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, ml)
			boxes = append(boxes, box)
		}
		for deadline := time.Now().Add(60 * time.Second); ; {
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
		victim := fmt.Sprintf("n%d-%d", trial, n-1)
		start := time.Now()
		_ = nodes[n-1].Shutdown()
		seen := map[int]bool{}
		for deadline := start.Add(60 * time.Second); len(seen) < n-1; {
			for i, b := range boxes[:n-1] {
				for _, e := range b.take() {
					if e.kind == evDead && e.name == victim {
						seen[i] = true
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("trial %d: only %d of %d survivors declared the node dead after 60s", trial, len(seen), n-1)
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
	d1 := newDelegate("a", newMailbox(), &published{})
	m1, err := memberlist.Create(memberlistConfig(&good, "a", kg, d1, zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Shutdown()
	m2, err := memberlist.Create(memberlistConfig(&bad, "b", kb, newDelegate("b", newMailbox(), &published{}), zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Shutdown()
	if _, err := m2.Join([]string{d1.localAddr()}); err == nil {
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

// memberlist hands out *memberlist.Node values that point into its own
// state, which it mutates under its node lock: reading one outside that
// lock is a data race (issue 18), and LocalNode dereferences a nil entry
// once the local node has left and been reaped. Outside the delegate's
// callbacks (which run with the lock held and copy what they need), no
// code in this package may call Members or LocalNode.
func TestNoMemberlistNodeReads(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) > 0 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Members" || sel.Sel.Name == "LocalNode") {
				t.Errorf("%s: %s() reads memberlist's node state outside its lock; use the delegate's events", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked only %d files", checked)
	}
}

// The delegate copies each node's name and address while memberlist holds
// its lock, and learns this node's own address from its own join, which
// memberlist.Create announces before returning.
func TestDelegateCopiesNodes(t *testing.T) {
	cfg := DefaultConfig("x", "delegate-test", testSecret)
	key, err := MemberlistKey(cfg.Secret, cfg.JobID)
	if err != nil {
		t.Fatal(err)
	}
	boxA, boxB := newMailbox(), newMailbox()
	da, db := newDelegate("a", boxA, &published{}), newDelegate("b", boxB, &published{})
	ca, cb := cfg, cfg
	ma, err := memberlist.Create(memberlistConfig(&ca, "a", key, da, zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Shutdown()
	mb, err := memberlist.Create(memberlistConfig(&cb, "b", key, db, zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Shutdown()
	if da.localAddr() == "" || db.localAddr() == "" || da.localAddr() == db.localAddr() {
		t.Fatalf("local addresses %q and %q", da.localAddr(), db.localAddr())
	}
	if _, err := mb.Join([]string{da.localAddr()}); err != nil {
		t.Fatal(err)
	}
	// b learns a's address from a's join (the push/pull of Join runs the
	// callbacks before Join returns).
	got := map[string]string{}
	for _, e := range boxB.take() {
		if e.kind == evAlive {
			got[e.name] = e.addr
		}
	}
	if got["a"] != da.localAddr() || got["b"] != db.localAddr() {
		t.Fatalf("b's events name %v, want a at %s and b at %s", got, da.localAddr(), db.localAddr())
	}
}

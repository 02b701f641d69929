package ringtail

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/obs"
)

// On shared memory with Pieces "always", an AllReduce larger than
// PieceBytes runs in pieces (the timeline names the program "ring-pieces")
// and gives the sequential result on every rank, for Sum, Avg and Max, with
// a short last piece and a piece that does not split evenly over the
// ranks; over unix sockets the same call runs the plain ring.
func TestLargeAllReducesRunInPiecesOnSharedMemory(t *testing.T) {
	const n, piece = 3, 64 << 10
	const count = 3*piece/4 + 7 // float32: three full pieces and 7 elements
	for _, tc := range []struct {
		name  string
		noShm bool
		want  string
	}{{"shm", false, "ring-pieces"}, {"unix", true, "ring"}} {
		t.Run(tc.name, func(t *testing.T) {
			timeline := filepath.Join(t.TempDir(), "trace.json")
			comms := startComms(t, n, func(c *Config) {
				c.PieceBytes, c.Pieces, c.DisableShm, c.Timeline = piece, "always", tc.noShm, timeline
			})
			ctx := context.Background()
			for _, op := range []Op{Sum, Avg, Max} {
				bufs := make([][]float32, n)
				want := make([]float32, count)
				for r := range bufs {
					bufs[r] = make([]float32, count)
					for i := range bufs[r] {
						v := float32((i*7 + r*131) % 1001) // integers: exact sums in any order
						bufs[r][i] = v
						switch {
						case op == Max:
							want[i] = max(want[i], v)
						default:
							want[i] += v
						}
					}
				}
				if op == Avg {
					for i := range want {
						want[i] /= n
					}
				}
				noErrors(t, each(comms, func(r int, c *Comm) error { return c.AllReduce(ctx, Float32s(bufs[r]), op) }))
				for r := range bufs {
					for i := range want {
						if bufs[r][i] != want[i] {
							t.Fatalf("%v: rank %d element %d = %v, want %v", op, r, i, bufs[r][i], want[i])
						}
					}
				}
			}
			for _, c := range comms {
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			}
			algos := allReduceAlgorithms(t, timeline, 0, n, 4*count)
			if len(algos) != 3 || strings.Count(strings.Join(algos, " "), tc.want+" ") != 2 || !strings.HasSuffix(strings.Join(algos, " "), " "+tc.want) {
				t.Fatalf("the three large calls ran %q, want %s each", algos, tc.want)
			}
		})
	}
}

// Ranks that would cut an AllReduce into different pieces are told so when
// they join: every rank, not only rank 0, whose rendezvous hears the
// refusal first and stops serving at once (the other ranks must still get
// the answer, not retry against the closed port until their connect
// timeout). Twenty rounds over each control plane: a lost answer showed in
// about one round in ten.
func TestEveryRankHearsWhyTheRanksDisagree(t *testing.T) {
	for _, plane := range []string{"libp2p", "tcp"} {
		for round := range 20 {
			comms, errs, err := joinLocal(context.Background(), 2, func(c *Config) {
				c.Secret, c.JobID, c.ControlPlane = []byte("test-secret-0123456"), "pieces", plane
				c.PieceBytes, c.ConnectTimeout = 64<<10+c.Rank*4096, 10*time.Second
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range comms {
				if c != nil {
					c.Close()
				}
			}
			if engine.PortTaken(errs[0]) {
				continue // another process took rank 0's port: a round that proves nothing
			}
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), "disagree on piece_bytes") {
					t.Fatalf("%s, round %d: rank %d: %v", plane, round, r, err)
				}
			}
		}
	}
}

// allReduceAlgorithms returns the algorithm of each AllReduce of bytes
// bytes in rank's timeline.
func allReduceAlgorithms(t *testing.T, timeline string, rank, n, bytes int) []string {
	t.Helper()
	data, err := os.ReadFile(obs.RankTimelinePath(timeline, rank, n))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := obs.ReadTrace(data)
	if err != nil {
		t.Fatal(err)
	}
	var algos []string
	for _, e := range evs {
		if args, ok := e["args"].(map[string]any); ok && e["name"] == "AllReduce" && args["bytes"] == float64(bytes) {
			algos = append(algos, args["algorithm"].(string))
		}
	}
	return algos
}

// With Pieces "auto" (the default) the ranks run a large AllReduce first as
// the plain ring, then in pieces, then keep what they measured faster,
// probing the other now and then: every rank runs the same algorithm for
// every call (their timelines agree call by call, whatever each one
// measured), every result is exact, and the agreements on the times are
// not the caller's calls (no 8-byte AllReduce in the timeline). Over unix
// sockets there is nothing to choose.
func TestRanksChooseTheSameAllReduceAlgorithm(t *testing.T) {
	const n, piece, calls = 3, 64 << 10, 60
	const count = 3*piece/4 + 7
	for _, noShm := range []bool{false, true} {
		timeline := filepath.Join(t.TempDir(), "trace.json")
		comms := startComms(t, n, func(c *Config) {
			c.PieceBytes, c.DisableShm, c.Timeline = piece, noShm, timeline
		})
		bufs := make([][]float32, n)
		for r := range bufs {
			bufs[r] = make([]float32, count)
		}
		for call := range calls {
			for r := range bufs {
				for i := range bufs[r] {
					bufs[r][i] = float32((i*7 + r*131 + call) % 1001)
				}
			}
			noErrors(t, each(comms, func(r int, c *Comm) error { return c.AllReduce(context.Background(), Float32s(bufs[r]), Sum) }))
			for r := range bufs {
				for i, v := range bufs[r] {
					if want := float32((i*7+call)%1001 + (i*7+131+call)%1001 + (i*7+262+call)%1001); v != want {
						t.Fatalf("call %d: rank %d element %d = %v, want %v", call, r, i, v, want)
					}
				}
			}
		}
		for _, c := range comms {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
		first := allReduceAlgorithms(t, timeline, 0, n, 4*count)
		for r := range n {
			algos := allReduceAlgorithms(t, timeline, r, n, 4*count)
			if len(algos) != calls || strings.Join(algos, " ") != strings.Join(first, " ") {
				t.Fatalf("shm %t: rank %d ran %q, rank 0 %q", !noShm, r, algos, first)
			}
			if agreements := allReduceAlgorithms(t, timeline, r, n, 8); len(agreements) != 0 {
				t.Fatalf("shm %t: rank %d's timeline shows %d 8-byte AllReduces: the tuner's agreements", !noShm, r, len(agreements))
			}
		}
		want := "ring ring ring ring-pieces ring-pieces ring-pieces "
		if noShm {
			want = strings.Repeat("ring ", 6)
		}
		if got := strings.Join(first, " ") + " "; !strings.HasPrefix(got, want) {
			t.Fatalf("shm %t: ran %q, want the ring's window, then pieces' (%q)", !noShm, first, want)
		}
	}
}

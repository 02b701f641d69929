package ringtail

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/obs"
)

// On shared memory an AllReduce larger than PieceBytes runs in pieces (the
// timeline names the program "ring-pieces") and gives the sequential
// result on every rank, for Sum, Avg and Max, with a short last piece and a
// piece that does not split evenly over the ranks; over unix sockets the
// same call runs the plain ring.
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
				c.PieceBytes, c.DisableShm, c.Timeline = piece, tc.noShm, timeline
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
			data, err := os.ReadFile(obs.RankTimelinePath(timeline, 0, n))
			if err != nil {
				t.Fatal(err)
			}
			evs, err := obs.ReadTrace(data)
			if err != nil {
				t.Fatal(err)
			}
			var algos []string
			for _, e := range evs {
				if args, ok := e["args"].(map[string]any); ok && e["name"] == "AllReduce" && args["bytes"] == float64(4*count) {
					algos = append(algos, args["algorithm"].(string))
				}
			}
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
				c.Secret, c.JobID, c.ControlPlane = []byte("test-secret"), "pieces", plane
				c.PieceBytes, c.ConnectTimeout = 64<<10+c.Rank*4096, 10*time.Second
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range comms {
				if c != nil {
					c.Close()
				}
			}
			if portTaken(errs[0]) {
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

package obs

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// flightRecorderOf returns a rank's flight recorder after calls calls of
// the world (each done), and the recorder serving it at /debug/flight.
func flightRecorderOf(t *testing.T, rank, world, calls int) *Recorder {
	t.Helper()
	fl, err := flight.New(flight.Config{Rank: rank, World: world, JobID: "job"})
	if err != nil {
		t.Fatal(err)
	}
	for c := 1; c <= calls; c++ {
		fl.Begin(&wire.Desc{Collective: wire.AllReduce, Group: wire.World, Call: uint64(c), Count: 8}, "ring", "")
		fl.End(nil)
	}
	r, err := New(Config{Rank: rank, World: world, Host: "testhost", MetricsAddr: "127.0.0.1:0", HostProc: fakeProc(),
		Flight: func(w io.Writer, last int) error { return fl.WriteLive(w, last) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// The dashboard reads the ranks' flight recorders and shows what Analyze
// makes of them (rank 1 has not made the call rank 0 made); a link that
// fell back from shared memory is in its rank's info.
func TestTheDashboardTellsTheFlightRecordersStory(t *testing.T) {
	r0, r1 := flightRecorderOf(t, 0, 2, 5), flightRecorderOf(t, 1, 2, 4)
	r1.SetLinks([]LinkInfo{{Peer: 0, Transport: "unix", Fallback: "shared memory unavailable (mmap: no memory)"}})
	dumps, errs := FetchFlight([]string{r0.Addr(), r1.Addr()}, "", 3, 10*time.Second)
	if len(errs) > 0 || len(dumps) != 2 || len(dumps[0].Entries) != 3 {
		t.Fatalf("FetchFlight: %d dumps, errors %v", len(dumps), errs)
	}
	d, err := NewDashboard(DashboardConfig{Listen: "127.0.0.1:0", Targets: []string{r0.Addr(), r1.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var story, fallback bool
	readEvents(t, d.URL()+"api/events", func(kind string, m map[string]any) bool {
		switch kind {
		case "flight":
			story = strings.Contains(fmt.Sprint(m["lines"]), "rank 1 completed AllReduce #4") && fmt.Sprint(m["culprits"]) == "[1]"
		case "info":
			if m["rank"] == 1.0 {
				fallback = strings.Contains(fmt.Sprint(m["links"]), "mmap: no memory")
			}
		}
		return story && fallback
	})
}

package obs

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// TorchTrace is a torch.profiler trace (prof.export_chrome_trace) of one
// rank, to be laid on that rank's ringtail timeline by Merge.
type TorchTrace struct {
	// Rank is the rank whose process recorded the trace.
	Rank int
	// Path is the trace file.
	Path string
}

// TorchClockEvent prefixes the name of the event ringtail's PyTorch
// backend records once per profiler session, at its first communication:
// "ringtail:clock unix_ns=N" names the wall-clock time (ns since the
// epoch) at which the event opened, which ties the torch trace's clock
// to the timeline's (whose base is a wall-clock time too).
const TorchClockEvent = "ringtail:clock unix_ns="

// TorchAlignment says how Merge placed one rank's torch trace.
type TorchAlignment struct {
	// Method is "clock" when the trace carries the backend's clock event
	// (TorchClockEvent), "calls" when the offset was measured from the
	// communication events alone (alignTorch).
	Method string `json:"method"`
	// OffsetUs is what was added to the torch trace's timestamps to put
	// them on the merged clock (microseconds).
	OffsetUs float64 `json:"offset_us"`
	// Anchors is the number of communication events in the torch trace
	// that name a collective the timeline records.
	Anchors int `json:"anchors"`
	// Matched is how many of them met a call of their name in the
	// timeline within torchAnchorTolerance once placed.
	Matched int `json:"matched"`
}

// torchCollective maps the op of a torch profiler event of a
// communication backend ("ringtail:all_reduce", "gloo:broadcast": the
// name after the backend's prefix) to the collective ringtail's timeline
// records for it. Ops that ringtail runs as several calls or as another
// collective (coalesced, gather, scatter, reduce) are not anchors.
func torchCollective(op string) (string, bool) {
	switch op {
	case "all_reduce":
		return "AllReduce", true
	case "broadcast":
		return "Broadcast", true
	case "all_gather":
		return "AllGather", true
	case "barrier":
		return "Barrier", true
	}
	return "", false
}

// anchor is one event of either side: the collective's name and its
// start (µs).
type anchor struct {
	name string
	ts   float64
}

// torchAnchorTolerance is how far (µs) a torch event's start may lie
// from its call's start in the timeline once aligned: the backend opens
// the event in Python before the library starts the call.
const torchAnchorTolerance = 2000

// alignTorch finds the offset that lays the torch anchors on the timeline
// anchors of the same names: among the translations that put one of the
// first torch anchors on a timeline call of its name, the one that puts
// the most torch anchors within torchAnchorTolerance of a call of their
// name (ties: the tightest), refined to the median difference of the
// matched pairs. Both slices are sorted by ts.
func alignTorch(timeline, torch []anchor) (offset float64, matched int) {
	byName := map[string][]float64{}
	for _, a := range timeline {
		byName[a.name] = append(byName[a.name], a.ts)
	}
	// nearest returns the timeline start of name nearest to ts.
	nearest := func(name string, ts float64) (float64, bool) {
		starts := byName[name]
		if len(starts) == 0 {
			return 0, false
		}
		i := sort.SearchFloat64s(starts, ts)
		best := math.Inf(1)
		for _, j := range []int{i - 1, i} {
			if j >= 0 && j < len(starts) && math.Abs(starts[j]-ts) < math.Abs(best-ts) {
				best = starts[j]
			}
		}
		return best, true
	}
	score := func(off float64) (n int, spread float64) {
		for _, a := range torch {
			if s, ok := nearest(a.name, a.ts+off); ok {
				if d := math.Abs(s - (a.ts + off)); d <= torchAnchorTolerance {
					n++
					spread += d
				}
			}
		}
		return n, spread
	}
	bestN, bestSpread := 0, math.Inf(1)
	for _, a := range torch[:min(len(torch), 8)] {
		for _, s := range byName[a.name] {
			off := s - a.ts
			if n, spread := score(off); n > bestN || (n == bestN && spread < bestSpread) {
				offset, bestN, bestSpread = off, n, spread
			}
		}
	}
	if bestN == 0 {
		return 0, 0
	}
	var diffs []float64
	for _, a := range torch {
		if s, ok := nearest(a.name, a.ts+offset); ok && math.Abs(s-(a.ts+offset)) <= torchAnchorTolerance {
			diffs = append(diffs, s-a.ts)
		}
	}
	slices.Sort(diffs)
	med := diffs[len(diffs)/2]
	if len(diffs)%2 == 0 {
		med = (diffs[len(diffs)/2-1] + diffs[len(diffs)/2]) / 2
	}
	return med, len(diffs)
}

// torchAnchors are the communication events of a torch trace that name
// a collective of torchCollectives, sorted by start.
func torchAnchors(events []map[string]any) []anchor {
	var out []anchor
	for _, ev := range events {
		name, _ := ev["name"].(string)
		i := strings.IndexByte(name, ':')
		if i < 0 || ev["ph"] == "M" {
			continue
		}
		coll, ok := torchCollective(name[i+1:])
		if !ok {
			continue
		}
		if ts, ok := num(ev["ts"]); ok {
			out = append(out, anchor{coll, ts})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ts < out[j].ts })
	return out
}

// timelineAnchors are the collective calls of a rank's timeline events
// (already on the merged clock), sorted by start.
func timelineAnchors(events []map[string]any) []anchor {
	var out []anchor
	for _, ev := range events {
		if ev["ph"] != "X" || ev["cat"] != "collective" {
			continue
		}
		name, _ := ev["name"].(string)
		if ts, ok := num(ev["ts"]); ok {
			out = append(out, anchor{name, ts})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ts < out[j].ts })
	return out
}

// torchTid is the thread a torch event is drawn on in the merged trace:
// the rank's process, threads from 1000 up (the timeline's own are
// small), one per torch (pid, tid).
type torchTid struct {
	ids   map[string]int
	names []string
}

func (t *torchTid) of(ev map[string]any) int {
	key := fmt.Sprint(ev["pid"], "/", ev["tid"])
	if id, ok := t.ids[key]; ok {
		return id
	}
	id := 1000 + len(t.names)
	t.ids[key] = id
	t.names = append(t.names, "torch "+key)
	return id
}

// torchClock returns the torch trace's clock event: its ts and the wall
// time its name gives.
func torchClock(events []map[string]any) (ts float64, unixNs int64, ok bool) {
	for _, ev := range events {
		name, _ := ev["name"].(string)
		rest, found := strings.CutPrefix(name, TorchClockEvent)
		if !found {
			continue
		}
		t, tok := num(ev["ts"])
		ns, err := strconv.ParseInt(rest, 10, 64)
		if tok && err == nil {
			return t, ns, true
		}
	}
	return 0, 0, false
}

// matchedAnchors counts the torch anchors that, moved by offset, start
// within torchAnchorTolerance of a timeline call of their name.
func matchedAnchors(timeline, torch []anchor, offset float64) int {
	n := 0
	for _, a := range torch {
		for _, c := range timeline {
			if c.name == a.name && math.Abs(c.ts-(a.ts+offset)) <= torchAnchorTolerance {
				n++
				break
			}
		}
	}
	return n
}

// placeTorch reads tr, places it on the rank's timeline events (already
// on the merged clock; wallToMerged maps a wall-clock time of the rank's
// process onto that clock) and returns its events moved onto that clock,
// drawn in the rank's process on threads named "torch <pid>/<tid>". The
// backend's clock event places it exactly; without one (another
// backend's trace, or a profiler session that began after the backend's
// first communication of it) the communication events do (alignTorch).
func placeTorch(tr TorchTrace, rankEvents []map[string]any, wallToMerged func(unixNs int64) float64) ([]map[string]any, TorchAlignment, error) {
	var al TorchAlignment
	data, err := os.ReadFile(tr.Path)
	if err != nil {
		return nil, al, err
	}
	events, err := ReadTrace(data)
	if err != nil {
		return nil, al, fmt.Errorf("%s: %w", tr.Path, err)
	}
	anchors := torchAnchors(events)
	al.Anchors = len(anchors)
	calls := timelineAnchors(rankEvents)
	if ts, unixNs, ok := torchClock(events); ok {
		al.Method = "clock"
		al.OffsetUs = wallToMerged(unixNs) - ts
		al.Matched = matchedAnchors(calls, anchors, al.OffsetUs)
	} else {
		al.Method = "calls"
		if len(anchors) == 0 {
			return nil, al, fmt.Errorf("%s: neither ringtail's clock event nor a communication event (<backend>:all_reduce, broadcast, all_gather, barrier) to align on: was the profiler on while the job communicated?", tr.Path)
		}
		al.OffsetUs, al.Matched = alignTorch(calls, anchors)
		if al.Matched == 0 {
			return nil, al, fmt.Errorf("%s: none of its %d communication events meets a call of rank %d's timeline: is it that rank's trace, of the same run?", tr.Path, len(anchors), tr.Rank)
		}
	}
	al.OffsetUs = math.Round(al.OffsetUs*1e3) / 1e3
	tids := torchTid{ids: map[string]int{}}
	var out []map[string]any
	for _, ev := range events {
		ts, ok := num(ev["ts"])
		if !ok || ev["ph"] == "M" {
			continue
		}
		moved := make(map[string]any, len(ev))
		for k, v := range ev {
			moved[k] = v
		}
		moved["ts"] = math.Round((ts+al.OffsetUs)*1e3) / 1e3
		moved["pid"] = tr.Rank
		moved["tid"] = tids.of(ev)
		out = append(out, moved)
	}
	for i, name := range tids.names {
		out = append(out, map[string]any{"name": "thread_name", "ph": "M", "pid": tr.Rank, "tid": 1000 + i,
			"args": map[string]any{"name": name}})
	}
	return out, al, nil
}

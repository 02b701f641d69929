package obs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
)

// MergeReport says how Merge aligned the ranks' clocks.
type MergeReport struct {
	// Ranks are the ranks merged, ascending.
	Ranks []int `json:"ranks"`
	// OffsetsUs is, by rank, the correction subtracted from its clock
	// after the wall-clock bases were applied (microseconds).
	OffsetsUs map[string]float64 `json:"clock_offsets_us"`
	// Matched is, by rank, how many call ends its host's offset was
	// measured from (0: the reference host, or wall clock only).
	Matched map[string]int `json:"matched_calls"`
	// Torch is, by rank, how the torch profiler trace given for it was
	// laid on its timeline (none given: absent).
	Torch map[string]TorchAlignment `json:"torch,omitempty"`
	// Events is the number of events written.
	Events int `json:"events"`
}

// rankTrace is one rank's file, parsed.
type rankTrace struct {
	path   string
	rank   int
	host   string // "" : unknown (its own clock)
	baseNs int64
	events []map[string]any
	ends   map[[2]uint64]float64 // (group, call) → end (µs, after the base shift)
}

// ReadTrace parses a trace-event file in the JSON Array Format (an
// unclosed array, as a killed process leaves it, is accepted) or the JSON
// Object Format ({"traceEvents": [...]}).
func ReadTrace(data []byte) ([]map[string]any, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, errors.New("empty trace")
	}
	if data[0] == '{' {
		var obj struct {
			TraceEvents []map[string]any `json:"traceEvents"`
		}
		if err := json.Unmarshal(data, &obj); err != nil {
			return nil, err
		}
		return obj.TraceEvents, nil
	}
	if data[len(data)-1] != ']' {
		data = append(bytes.TrimRight(data, ", \n\r\t"), ']')
	}
	var evs []map[string]any
	if err := json.Unmarshal(data, &evs); err != nil {
		return nil, err
	}
	return evs, nil
}

func num(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}

func readRankTrace(path string) (*rankTrace, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	evs, err := ReadTrace(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	rt := &rankTrace{path: path, rank: -1, events: evs, ends: map[[2]uint64]float64{}}
	for _, ev := range evs {
		pid, ok := num(ev["pid"])
		if !ok {
			return nil, fmt.Errorf("%s: an event without a pid", path)
		}
		if rt.rank < 0 {
			rt.rank = int(pid)
		} else if rt.rank != int(pid) {
			return nil, fmt.Errorf("%s: events of pids %d and %d: not one rank's timeline", path, rt.rank, int(pid))
		}
		if ev["ph"] == "M" && ev["name"] == "process_name" {
			if args, ok := ev["args"].(map[string]any); ok {
				if b, ok := num(args["clock_base_unix_ns"]); ok {
					rt.baseNs = int64(b)
				}
				rt.host, _ = args["host"].(string)
			}
		}
	}
	if rt.rank < 0 {
		return nil, fmt.Errorf("%s: no events", path)
	}
	return rt, nil
}

// Merge reads the ranks' timeline files and writes one trace (JSON
// Object Format) with every rank on one clock. Clocks are aligned in two
// stages: each file's wall-clock base (args.clock_base_unix_ns of its
// process_name event), which ranks of one host (args.host) share; then
// the residual skew between hosts, measured from the data: every rank of
// a collective leaves it within about one hop of the others, so the
// median difference of the end times of the calls two hosts' ranks share
// (matched by group and call number) is their clocks' offset. Hosts that
// share no call with the others keep their wall clock.
//
// Each torch profiler trace in torch is laid on its rank's timeline: a
// torch trace's clock has no wall-clock base (torch 1.13's starts at the
// profiler's start), so its offset is measured from the data too, the
// backend's communication events (ringtail:all_reduce, ...) against the
// calls the timeline records (alignTorch); its events join the rank's
// process on threads of their own.
func Merge(w io.Writer, paths []string, torch ...TorchTrace) (MergeReport, error) {
	var rep MergeReport
	if len(paths) == 0 {
		return rep, errors.New("obs: merge: no timeline files")
	}
	var traces []*rankTrace
	seen := map[int]string{}
	for _, p := range paths {
		rt, err := readRankTrace(p)
		if err != nil {
			return rep, fmt.Errorf("obs: merge: %w", err)
		}
		if other, dup := seen[rt.rank]; dup {
			return rep, fmt.Errorf("obs: merge: %s and %s are both rank %d", other, p, rt.rank)
		}
		seen[rt.rank] = p
		traces = append(traces, rt)
	}
	sort.Slice(traces, func(i, j int) bool { return traces[i].rank < traces[j].rank })
	minBase := traces[0].baseNs
	for _, rt := range traces {
		minBase = min(minBase, rt.baseNs)
	}
	// Stage 1: wall-clock bases.
	for _, rt := range traces {
		shift := float64(rt.baseNs-minBase) / 1e3
		for _, ev := range rt.events {
			ts, ok := num(ev["ts"])
			if !ok {
				continue
			}
			ev["ts"] = ts + shift
			if ev["ph"] == "X" && ev["cat"] == "collective" {
				args, _ := ev["args"].(map[string]any)
				g, gok := num(args["group"])
				c, cok := num(args["call"])
				dur, dok := num(ev["dur"])
				if gok && cok && dok {
					rt.ends[[2]uint64{uint64(g), uint64(c)}] = ts + shift + dur
				}
			}
		}
	}
	// Stage 2: ranks of one host share its clock; between hosts, the
	// offset is the median difference of the end times of the calls their
	// ranks share, breadth-first from the lowest rank's host.
	n := len(traces)
	hostOf := make([]int, n) // rank index → host group
	var groups [][]int
	byName := map[string]int{}
	for i, rt := range traces {
		g, ok := byName[rt.host]
		if !ok || rt.host == "" {
			g = len(groups)
			groups = append(groups, nil)
			if rt.host != "" {
				byName[rt.host] = g
			}
		}
		hostOf[i] = g
		groups[g] = append(groups[g], i)
	}
	gOffset := make([]float64, len(groups))
	gMatched := make([]int, len(groups))
	done := make([]bool, len(groups))
	for root := range groups {
		if done[root] {
			continue
		}
		done[root] = true
		queue := []int{root}
		for len(queue) > 0 {
			a := queue[0]
			queue = queue[1:]
			for b := range groups {
				if done[b] {
					continue
				}
				var diffs []float64
				for _, ia := range groups[a] {
					for _, ib := range groups[b] {
						for k, ea := range traces[ia].ends {
							if eb, ok := traces[ib].ends[k]; ok {
								diffs = append(diffs, eb-ea)
							}
						}
					}
				}
				if len(diffs) == 0 {
					continue
				}
				slices.Sort(diffs)
				med := diffs[len(diffs)/2]
				if len(diffs)%2 == 0 {
					med = (diffs[len(diffs)/2-1] + diffs[len(diffs)/2]) / 2
				}
				gOffset[b] = gOffset[a] + med
				gMatched[b] = len(diffs)
				done[b] = true
				queue = append(queue, b)
			}
		}
	}
	offset := make([]float64, n)
	matched := make([]int, n)
	for i := range traces {
		offset[i], matched[i] = gOffset[hostOf[i]], gMatched[hostOf[i]]
	}
	rep.OffsetsUs, rep.Matched = map[string]float64{}, map[string]int{}
	var all []map[string]any
	for i, rt := range traces {
		rep.Ranks = append(rep.Ranks, rt.rank)
		key := strconv.Itoa(rt.rank)
		rep.OffsetsUs[key] = math.Round(offset[i]*1e3) / 1e3
		rep.Matched[key] = matched[i]
		for _, ev := range rt.events {
			if ts, ok := num(ev["ts"]); ok {
				ev["ts"] = math.Round((ts-offset[i])*1e3) / 1e3
			}
			all = append(all, ev)
		}
	}
	for _, tr := range torch {
		if _, dup := rep.Torch[strconv.Itoa(tr.Rank)]; dup {
			return rep, fmt.Errorf("obs: merge: two torch traces of rank %d", tr.Rank)
		}
		i := slices.IndexFunc(traces, func(rt *rankTrace) bool { return rt.rank == tr.Rank })
		if i < 0 {
			return rep, fmt.Errorf("obs: merge: torch trace %s is of rank %d, which has no timeline file in the merge", tr.Path, tr.Rank)
		}
		// A wall-clock time W of the rank's process is (W − base)/1e3 on
		// its timeline's clock, moved by the base shift and the offset
		// like its events: the base cancels.
		off := offset[i]
		wallToMerged := func(unixNs int64) float64 { return float64(unixNs-minBase)/1e3 - off }
		placed, al, err := placeTorch(tr, traces[i].events, wallToMerged)
		if err != nil {
			return rep, fmt.Errorf("obs: merge: %w", err)
		}
		if rep.Torch == nil {
			rep.Torch = map[string]TorchAlignment{}
		}
		rep.Torch[strconv.Itoa(tr.Rank)] = al
		all = append(all, placed...)
	}
	rep.Events = len(all)
	out := struct {
		TraceEvents     []map[string]any `json:"traceEvents"`
		DisplayTimeUnit string           `json:"displayTimeUnit"`
		OtherData       MergeReport      `json:"otherData"`
	}{all, "ms", rep}
	enc := json.NewEncoder(w)
	if err := enc.Encode(out); err != nil {
		return rep, fmt.Errorf("obs: merge: %w", err)
	}
	return rep, nil
}

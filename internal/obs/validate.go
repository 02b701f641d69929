package obs

import (
	"errors"
	"fmt"
	"sort"
)

// ValidateTrace checks events against the trace-event format as Perfetto
// and chrome://tracing read it: every event has a string name, a known
// phase and numeric pid and tid; complete events ("X") a non-negative
// ts and dur; instant events ("i") a ts and a scope of g, p or t;
// metadata events ("M") a known name with its args; and the complete
// events of one thread nest (a slice that starts inside another ends
// inside it), which the viewers need to draw them as a stack.
func ValidateTrace(events []map[string]any) error {
	var errs []error
	bad := func(i int, format string, args ...any) {
		if len(errs) < 10 {
			errs = append(errs, fmt.Errorf("event %d: "+format, append([]any{i}, args...)...))
		}
	}
	type slice struct{ ts, end float64 }
	threads := map[[2]float64][]slice{}
	for i, ev := range events {
		name, ok := ev["name"].(string)
		if !ok {
			bad(i, "no string name")
		}
		ph, _ := ev["ph"].(string)
		pid, pok := num(ev["pid"])
		tid, tok := num(ev["tid"])
		if !pok || !tok {
			bad(i, "pid and tid must be numbers")
		}
		ts, tsok := num(ev["ts"])
		switch ph {
		case "X":
			dur, dok := num(ev["dur"])
			if !tsok || !dok || ts < 0 || dur < 0 {
				bad(i, "complete event %q needs ts ≥ 0 and dur ≥ 0", name)
				continue
			}
			k := [2]float64{pid, tid}
			threads[k] = append(threads[k], slice{ts, ts + dur})
		case "i", "I":
			s, _ := ev["s"].(string)
			if !tsok || (s != "" && s != "g" && s != "p" && s != "t") {
				bad(i, "instant event %q needs ts and a scope g, p or t", name)
			}
		case "M":
			args, _ := ev["args"].(map[string]any)
			switch name {
			case "process_name", "thread_name", "process_labels":
				if _, ok := args["name"].(string); !ok && name != "process_labels" {
					bad(i, "metadata %q needs args.name", name)
				}
			case "process_sort_index", "thread_sort_index":
				if _, ok := num(args["sort_index"]); !ok {
					bad(i, "metadata %q needs args.sort_index", name)
				}
			default:
				bad(i, "unknown metadata %q", name)
			}
		case "B", "E", "C", "b", "e", "n", "s", "t", "f", "P", "O", "N", "D":
			if !tsok {
				bad(i, "event %q of phase %s needs ts", name, ph)
			}
		default:
			bad(i, "unknown phase %q", ph)
		}
	}
	// Nesting: sorted by start (longer first on ties), every slice must
	// end within the innermost open slice it starts in.
	const eps = 0.0015 // µs: rounding of the three decimals
	for k, ss := range threads {
		sort.Slice(ss, func(a, b int) bool {
			if ss[a].ts != ss[b].ts {
				return ss[a].ts < ss[b].ts
			}
			return ss[a].end > ss[b].end
		})
		var open []slice
		for _, s := range ss {
			for len(open) > 0 && open[len(open)-1].end <= s.ts+eps {
				open = open[:len(open)-1]
			}
			if len(open) > 0 && s.end > open[len(open)-1].end+eps {
				if len(errs) < 10 {
					errs = append(errs, fmt.Errorf("pid %v tid %v: slice [%.3f, %.3f] overlaps [%.3f, %.3f] without nesting",
						k[0], k[1], s.ts, s.end, open[len(open)-1].ts, open[len(open)-1].end))
				}
				continue
			}
			open = append(open, s)
		}
	}
	return errors.Join(errs...)
}

package slurm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxHosts bounds how many names one host list or tasks-per-node list may
// expand to (Slurm's own hostlist refuses ranges this long as well).
const MaxHosts = 1 << 16

// ErrHostList is wrapped by every error of ExpandHostList.
var ErrHostList = errors.New("bad Slurm host list")

// ErrTasksPerNode is wrapped by every error of ExpandTasksPerNode.
var ErrTasksPerNode = errors.New("bad Slurm tasks-per-node list")

// ExpandHostList expands a Slurm host list, the form of
// SLURM_JOB_NODELIST and `scontrol show hostnames`'s input, into host
// names in order:
//
//	node[01-04,07]        node01 node02 node03 node04 node07
//	gpu[8-10],login       gpu8 gpu9 gpu10 login
//	rack[0-1]-n[0-1]      rack0-n0 rack0-n1 rack1-n0 rack1-n1
//
// Items are separated by commas (or white space) outside brackets; a
// bracket holds comma-separated numbers and ranges lo-hi (lo ≤ hi), and a
// range is zero-padded to the width of lo when lo has leading zeros
// (n[01-2] is n01 n02; n[1-02] is n1 n2, as Slurm does). Several brackets
// in one item expand to every combination, left to right. Empty items are
// skipped and duplicates kept, as Slurm does; text after the last bracket
// ("n[1-2]-ib") is accepted, which Slurm's own parser refuses. An empty
// list, an unbalanced or empty bracket, a descending or non-numeric range,
// or more than MaxHosts names is an error wrapping ErrHostList. It is a
// pure function.
func ExpandHostList(s string) ([]string, error) {
	items, err := splitTopLevel(s)
	if err != nil {
		return nil, err
	}
	var hosts []string
	for _, item := range items {
		names, err := expandItem(item, MaxHosts-len(hosts))
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, names...)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%w: %q names no host", ErrHostList, s)
	}
	return hosts, nil
}

// splitTopLevel splits s at commas and white space outside brackets,
// dropping empty items.
func splitTopLevel(s string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	flush := func(end int) {
		if end > start {
			items = append(items, s[start:end])
		}
		start = end + 1
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '[':
			if depth > 0 {
				return nil, fmt.Errorf("%w: %q: nested '['", ErrHostList, s)
			}
			depth++
		case c == ']':
			if depth == 0 {
				return nil, fmt.Errorf("%w: %q: ']' without '['", ErrHostList, s)
			}
			depth--
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n'):
			flush(i)
		}
	}
	if depth > 0 {
		return nil, fmt.Errorf("%w: %q: missing ']'", ErrHostList, s)
	}
	flush(len(s))
	return items, nil
}

// expandItem expands one item with zero or more brackets into at most
// limit names.
func expandItem(item string, limit int) ([]string, error) {
	names := []string{""}
	rest := item
	for rest != "" {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			for i := range names {
				names[i] += rest
			}
			break
		}
		end := strings.IndexByte(rest, ']') // balanced: splitTopLevel checked
		prefix, body := rest[:open], rest[open+1:end]
		rest = rest[end+1:]
		values, err := expandRanges(item, body, limit)
		if err != nil {
			return nil, err
		}
		if len(names)*len(values) > limit {
			return nil, fmt.Errorf("%w: %q expands to more than %d hosts", ErrHostList, item, MaxHosts)
		}
		next := make([]string, 0, len(names)*len(values))
		for _, n := range names {
			for _, v := range values {
				next = append(next, n+prefix+v)
			}
		}
		names = next
	}
	return names, nil
}

// expandRanges expands the inside of one bracket ("01-04,07").
func expandRanges(item, body string, limit int) ([]string, error) {
	if body == "" {
		return nil, fmt.Errorf("%w: %q: empty brackets", ErrHostList, item)
	}
	var out []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, errA := parseDigits(lo)
		b, errB := parseDigits(hi)
		if errA != nil || errB != nil {
			return nil, fmt.Errorf("%w: %q: %q is not a number or a range lo-hi", ErrHostList, item, r)
		}
		if a > b {
			return nil, fmt.Errorf("%w: %q: range %q descends", ErrHostList, item, r)
		}
		if b-a >= uint64(limit-len(out)) {
			return nil, fmt.Errorf("%w: %q expands to more than %d hosts", ErrHostList, item, MaxHosts)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		for v := a; v <= b; v++ {
			out = append(out, fmt.Sprintf("%0*d", width, v))
		}
	}
	return out, nil
}

// parseDigits parses a non-empty run of decimal digits (no sign).
func parseDigits(s string) (uint64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseUint(s, 10, 64)
}

// ExpandTasksPerNode expands a Slurm tasks-per-node list, the form of
// SLURM_TASKS_PER_NODE, SLURM_STEP_TASKS_PER_NODE and
// SLURM_JOB_CPUS_PER_NODE, into one count per node: "2(x3),1" is
// [2 2 2 1]. Counts must be positive (CPU lists aside, Slurm never lists
// a node with no task), repeats at least 1, and the expansion at most
// MaxHosts long; anything else is an error wrapping ErrTasksPerNode. It is
// a pure function.
func ExpandTasksPerNode(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty", ErrTasksPerNode)
	}
	var out []int
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		count, repeat := item, "1"
		if i := strings.IndexByte(item, '('); i >= 0 {
			if !strings.HasPrefix(item[i:], "(x") || !strings.HasSuffix(item, ")") {
				return nil, fmt.Errorf("%w: %q: %q is not N or N(xR)", ErrTasksPerNode, s, item)
			}
			count, repeat = item[:i], item[i+2:len(item)-1]
		}
		n, errN := parseDigits(count)
		r, errR := parseDigits(repeat)
		switch {
		case errN != nil || errR != nil:
			return nil, fmt.Errorf("%w: %q: %q is not N or N(xR)", ErrTasksPerNode, s, item)
		case n < 1 || n > MaxHosts:
			return nil, fmt.Errorf("%w: %q: %d tasks on a node is not in 1..%d", ErrTasksPerNode, s, n, MaxHosts)
		case r < 1:
			return nil, fmt.Errorf("%w: %q: repeat count must be at least 1", ErrTasksPerNode, s)
		case r > uint64(MaxHosts-len(out)):
			return nil, fmt.Errorf("%w: %q lists more than %d nodes", ErrTasksPerNode, s, MaxHosts)
		}
		for range r {
			out = append(out, int(n))
		}
	}
	return out, nil
}

package faults

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one fault × transport line of the summary.
type Row struct {
	Fault     Fault
	Transport Transport
	Runs      int
	Passed    int
	Problems  map[string]int // runs with at least one problem of the class
	Detect    []time.Duration
	Named     int // runs where ringtail run named the fault's target
}

// Summarize groups verdicts by fault and transport, in Faults order.
func Summarize(results []Result, verdicts []Verdict) []Row {
	type key struct {
		f Fault
		t Transport
	}
	rows := map[key]*Row{}
	var order []key
	for i, r := range results {
		k := key{r.Scenario.Fault, r.Scenario.Transport}
		row := rows[k]
		if row == nil {
			row = &Row{Fault: k.f, Transport: k.t, Problems: map[string]int{}}
			rows[k] = row
			order = append(order, k)
		}
		v := verdicts[i]
		row.Runs++
		if v.OK() {
			row.Passed++
		}
		for _, c := range Problems {
			if v.Has(c) {
				row.Problems[c]++
			}
		}
		row.Detect = append(row.Detect, v.Detect...)
		if v.Launcher.Named == r.Scenario.Target {
			row.Named++
		}
	}
	rank := func(f Fault) int { return slices.Index(append([]Fault{FaultNone}, Faults...), f) }
	slices.SortFunc(order, func(a, b key) int {
		if d := rank(a.f) - rank(b.f); d != 0 {
			return d
		}
		return strings.Compare(string(a.t), string(b.t))
	})
	out := make([]Row, 0, len(order))
	for _, k := range order {
		out = append(out, *rows[k])
	}
	return out
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// WriteTable prints the summary: runs, passes, the runs with each problem
// class, the detection latency (median and max over surviving ranks) and
// how often ringtail run named the target.
func WriteTable(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "fault\ttransport\truns\tpass\t")
	for _, c := range Problems {
		fmt.Fprintf(tw, "%s\t", c)
	}
	fmt.Fprint(tw, "detect p50\tdetect max\tnamed target\t\n")
	var tot Row
	tot.Problems = map[string]int{}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t", r.Fault, r.Transport, r.Runs, r.Passed)
		for _, c := range Problems {
			fmt.Fprintf(tw, "%d\t", r.Problems[c])
			tot.Problems[c] += r.Problems[c]
		}
		fmt.Fprintf(tw, "%v\t%v\t%d\t\n", percentile(r.Detect, 0.5).Round(time.Millisecond), percentile(r.Detect, 1).Round(time.Millisecond), r.Named)
		tot.Runs += r.Runs
		tot.Passed += r.Passed
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t", tot.Runs, tot.Passed)
	for _, c := range Problems {
		fmt.Fprintf(tw, "%d\t", tot.Problems[c])
	}
	fmt.Fprint(tw, "\t\t\t\n")
	_ = tw.Flush()
}

// WriteFloodTable prints the floods' outcomes against a budget for RSS
// growth.
func WriteFloodTable(w io.Writer, floods []FloodResult, budget int64) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "target\tconns\topened\tdial errors\tRSS before\tRSS peak\tgrowth\twithin budget\treal job\trefusal lines\ttook\t\n")
	for _, f := range floods {
		if f.Err != nil {
			fmt.Fprintf(tw, "%s\t%d\t\t\t\t\t\t\terror: %v\t\t%v\t\n", f.Target, f.Conns, f.Err, f.Took.Round(time.Millisecond))
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%v\t%v (%s)\t%d\t%v\t\n", f.Target, f.Conns, f.Opened, f.DialErrors,
			mib(f.RSSBefore), mib(f.RSSPeak), mib(f.Growth()), f.Growth() <= budget, f.JobOK, f.Job, f.Refusals, f.Took.Round(time.Millisecond))
	}
	_ = tw.Flush()
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

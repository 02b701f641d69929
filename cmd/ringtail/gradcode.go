package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ringtail-ml/ringtail/gradcode"
	"github.com/ringtail-ml/ringtail/internal/cli"
)

const gradcodeUsage = `Usage: ringtail gradcode plan -n N -s S [flags]

Builds a gradient-coding plan (package gradcode) and prints which partitions
each worker computes, the encoding matrix B, the groups, the payload type and
the plan's measured numerical quality. With --stragglers it also prints the
decoding vector over all n ranks (0 for stragglers). Every rank computes the
same plan from the same flags. See docs/gradcode.md.
`

// gradcodePlanJSON is the --json output of 'ringtail gradcode plan'.
type gradcodePlanJSON struct {
	Scheme       gradcode.Scheme       `json:"scheme"`
	Construction gradcode.Construction `json:"construction"`
	N            int                   `json:"n"`
	S            int                   `json:"s"`
	K            int                   `json:"k"`
	Assignment   [][]int               `json:"assignment"`
	B            [][]float64           `json:"B"`
	Groups       [][]int               `json:"groups"`
	PayloadDType gradcode.DType        `json:"payload_dtype"`
	Quality      gradcode.Quality      `json:"quality"`
	Stragglers   []int                 `json:"stragglers,omitempty"`
	Decode       []float64             `json:"decode,omitempty"`
}

// runGradcode is 'ringtail gradcode': its only sub-subcommand is 'plan'.
func runGradcode(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, "ringtail gradcode: missing subcommand (want 'plan'; run 'ringtail gradcode --help')\n")
		return 2
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		gradcodePlanFlags(new(gradcodeFlags)).Help(stdout)
		return 0
	case "plan":
		return runGradcodePlan(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "ringtail gradcode: unknown subcommand %q (want 'plan')\n", args[0])
		return 2
	}
}

// gradcodeFlags holds the flags of 'ringtail gradcode plan'.
type gradcodeFlags struct {
	n, s, k                       int
	seed                          int64
	scheme, construction          string
	throughput, stragglers, dtype string
	json                          bool
}

// gradcodePlanFlags registers the flags of 'ringtail gradcode plan' into f.
func gradcodePlanFlags(f *gradcodeFlags) *cli.Command {
	cmd := cli.New("ringtail gradcode plan", gradcodeUsage)
	fs := cmd.Flags
	fs.IntVar(&f.n, "n", 0, "number of workers (default: the length of --throughput)")
	fs.IntVar(&f.s, "s", 0, "number of stragglers to tolerate")
	fs.IntVar(&f.k, "k", 0, "number of data partitions (cyclic: n; default for hetero/group: the best-balanced k in [n, 3n])")
	fs.Int64Var(&f.seed, "seed", 0, "seed of every random choice")
	fs.StringVar(&f.scheme, "scheme", "hetero", "`scheme`: cyclic, hetero or group")
	fs.StringVar(&f.construction, "construction", "structured", "`construction` of B: structured or random (the papers' baseline)")
	fs.StringVar(&f.throughput, "throughput", "", "comma-separated per-worker `throughputs` (default: all equal)")
	fs.StringVar(&f.stragglers, "stragglers", "", "comma-separated straggler `ranks` to print the decoding vector for")
	fs.StringVar(&f.dtype, "payload-dtype", "", "force the payload `type`: float32 or float64 (default: chosen from measured quality)")
	fs.BoolVar(&f.json, "json", false, "print the plan as JSON")
	return cmd
}

// runGradcodePlan is 'ringtail gradcode plan'.
func runGradcodePlan(args []string, stdout, stderr io.Writer) int {
	var f gradcodeFlags
	cmd := gradcodePlanFlags(&f)
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ringtail gradcode plan: "+format+"\n", a...)
		return 2
	}
	if code, ok := cmd.Parse(args, stdout, stderr); !ok {
		return code
	}
	var thr []float64
	if f.throughput != "" {
		for _, field := range strings.Split(f.throughput, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(field), 64)
			if err != nil {
				return usageErr("bad --throughput value %q", field)
			}
			thr = append(thr, x)
		}
		if f.n == 0 {
			f.n = len(thr)
		}
	}
	cfg := gradcode.Config{
		Scheme:       gradcode.Scheme(f.scheme),
		N:            f.n,
		S:            f.s,
		K:            f.k,
		Throughputs:  thr,
		Seed:         f.seed,
		Construction: gradcode.Construction(f.construction),
		PayloadDType: gradcode.DType(f.dtype),
	}
	if err := cfg.Validate(); err != nil {
		return usageErr("%v", err)
	}
	var stragglers []int
	if f.stragglers != "" {
		for _, field := range strings.Split(f.stragglers, ",") {
			r, err := strconv.Atoi(strings.TrimSpace(field))
			if err != nil || r < 0 || r >= f.n {
				return usageErr("bad --stragglers rank %q (want 0 ≤ rank < %d)", field, f.n)
			}
			stragglers = append(stragglers, r)
		}
	}
	p, err := gradcode.NewPlan(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "ringtail gradcode plan: %v\n", err)
		return 1
	}
	out := gradcodePlanJSON{
		Scheme: p.Scheme, Construction: p.Construction, N: p.N, S: p.S, K: p.K,
		Assignment: p.Assignment, B: p.B, Groups: p.Groups, PayloadDType: p.PayloadDType, Quality: p.Quality,
		Stragglers: stragglers,
	}
	if stragglers != nil {
		dead := make([]bool, p.N)
		for _, r := range stragglers {
			if dead[r] {
				return usageErr("straggler rank %d listed twice", r)
			}
			dead[r] = true
		}
		var survivors []int
		for r := 0; r < p.N; r++ {
			if !dead[r] {
				survivors = append(survivors, r)
			}
		}
		out.Decode, err = p.Decode(survivors)
		if err != nil {
			fmt.Fprintf(stderr, "ringtail gradcode plan: stragglers %v: %v\n", stragglers, err)
			return 1
		}
	}
	if f.json {
		if err := printJSONLine(stdout, out); err != nil { // one line: pipe it to jq
			fmt.Fprintf(stderr, "ringtail gradcode plan: %v\n", err)
			return 1
		}
		return 0
	}
	printGradcodePlan(stdout, out)
	return 0
}

// printGradcodePlan writes the human-readable plan.
func printGradcodePlan(w io.Writer, p gradcodePlanJSON) {
	q := p.Quality
	fmt.Fprintf(w, "scheme %s (%s)  n=%d s=%d k=%d  payload %s\n", p.Scheme, p.Construction, p.N, p.S, p.K, p.PayloadDType)
	coverage := "sampled"
	if q.Exhaustive {
		coverage = "all"
	}
	fmt.Fprintf(w, "quality over %d straggler sets (%s): max|a| %.3g  max|B| %.3g  cond(B_F) ≤ %.3g  amplification %.3g  float32 rel err ≈ %.2g (target %.0e)\n",
		q.Patterns, coverage, q.MaxAbsDecode, q.MaxAbsB, q.MaxCondDecode, q.MaxAmplification, q.PredictedRelErr32, q.Target)
	if q.AmplificationBound > 0 {
		kind := "sampled"
		if q.BoundCertified {
			kind = "certified over every straggler set"
		}
		fmt.Fprintf(w, "amplification bound %.3g (%s)\n", q.AmplificationBound, kind)
	}
	if len(p.Groups) > 0 {
		fmt.Fprintf(w, "groups (decode with 0/1 as soon as one is complete): %v\n", p.Groups)
	}
	fmt.Fprintln(w, "\nworker  load  partitions")
	for i, parts := range p.Assignment {
		fmt.Fprintf(w, "%6d  %4d  %v\n", i, len(parts), parts)
	}
	fmt.Fprintf(w, "\nB (%d×%d, row = worker, column = partition):\n", p.N, p.K)
	for _, row := range p.B {
		var sb strings.Builder
		for _, x := range row {
			fmt.Fprintf(&sb, " %8.4g", x)
		}
		fmt.Fprintln(w, sb.String())
	}
	if p.Decode != nil {
		fmt.Fprintf(w, "\ndecode with stragglers %v (coefficient per rank):\n", p.Stragglers)
		var sb strings.Builder
		for _, x := range p.Decode {
			fmt.Fprintf(&sb, " %.6g", x)
		}
		fmt.Fprintln(w, sb.String())
	}
}

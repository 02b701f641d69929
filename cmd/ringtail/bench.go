package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/bench"
	"github.com/ringtail-ml/ringtail/internal/cli"
	"github.com/ringtail-ml/ringtail/internal/launch"
	"github.com/ringtail-ml/ringtail/internal/launch/slurm"
	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

const benchUsage = `Usage: ringtail bench allreduce|allgather|broadcast|reducescatter|alltoall -np N [flags]
       ringtail run -H host1:1,host2:1 ... -- ringtail bench allreduce [flags]
       ringtail bench balance [--exec sleep|virtual] [--json]
       ringtail bench straggler [--ranks 4,8] [--patterns a,b] [--policy adaptive,star] [--json]
       ringtail bench recovery [-np 4] [--victim 0] [--runs 5] [--json]
       ringtail bench gradcode [--speeds 1,1,2,2,4,4] [--json]

Launches N local ranks and prints nccl-tests columns: size, count, type,
redop, root, time (us), algbw and busbw (decimal GB/s), #wrong. Sizes run
from -b to -e, multiplied by -f; each rank holds two buffers of -e bytes,
checked against the memory available before anything is allocated.

Started by a launcher (RANK and WORLD_SIZE set: ringtail run, torchrun;
a task of a Slurm job step: srun -n 4 ringtail bench ...; a Kubernetes
Indexed Job's pod), each process is one rank of the launcher's job
instead, and rank 0 prints the table: this is how to measure across
hosts. -np, if given, must equal WORLD_SIZE.

The flags below are those of the collectives; 'ringtail bench KIND --help'
lists those of balance, straggler, recovery and gradcode.
`

// benchCollectiveUsage is the help of 'ringtail bench COLLECTIVE'.
const benchCollectiveUsage = `Usage: ringtail bench %[1]s -np N [-b 8] [-e 64M] [-f 2] [-d float32] [flags]
       ringtail run -H host1:1,host2:1 ... -- ringtail bench %[1]s [flags]

Launches N local ranks (or runs as one rank of a launcher's job) and
prints the nccl-tests columns of %[1]s from -b to -e bytes: size, count,
type, redop, root, time (us), algbw and busbw (decimal GB/s), #wrong.
Each rank holds two buffers of -e bytes. See 'ringtail bench --help'.
`

// defaultMaxSize is -e's default.
const defaultMaxSize = "64M"

type sweepFlags struct {
	np                   int
	minB, maxB, factor   string
	dtype, op            string
	root, iters, warmup  int
	check, jsonOut       bool
	channels, chunkBytes int
	smallBytes           int
	pieceBytes           int
	pieces               string
	algorithm            string
	noUnix, noShm        bool
	dumpPlan             int
	dumpHosts            int
	dumpLinks            string
	bindTo               string
}

func (f *sweepFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.np, "np", 2, "number of ranks to launch")
	fs.StringVar(&f.minB, "b", "8", "minimum size (bytes; K, M, G suffixes)")
	fs.StringVar(&f.maxB, "e", defaultMaxSize, "maximum size (at least -b)")
	fs.StringVar(&f.factor, "f", "2", "size multiplication factor")
	fs.StringVar(&f.dtype, "d", "float32", "element type: float32, float64, int32, int64, float16, bfloat16")
	fs.StringVar(&f.op, "o", "sum", "reduction: sum, prod, min, max, avg")
	fs.IntVar(&f.root, "r", 0, "root rank (broadcast)")
	fs.IntVar(&f.iters, "iters", 20, "timed iterations per size")
	fs.IntVar(&f.warmup, "warmup", 5, "untimed iterations per size")
	fs.BoolVar(&f.check, "check", true, "verify results once per size (#wrong)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object per size")
	fs.IntVar(&f.channels, "channels", ringtail.DefaultChannels, "parallel rings")
	fs.IntVar(&f.chunkBytes, "chunk", ringtail.DefaultChunkBytes, "pipelining chunk in bytes")
	fs.IntVar(&f.smallBytes, "small", ringtail.DefaultSmallBytes, "latency-algorithm threshold in bytes")
	fs.IntVar(&f.pieceBytes, "piece", ringtail.DefaultPieceBytes, "allreduce piece in bytes on shared memory (0: the plain ring only)")
	fs.StringVar(&f.pieces, "pieces", "auto", "auto: measure pieces against the plain ring and keep the faster; always; off")
	fs.BoolVar(&f.noUnix, "no-unix", false, "use TCP loopback instead of unix sockets")
	fs.BoolVar(&f.noShm, "no-shm", false, "use unix sockets instead of shared memory")
	fs.StringVar(&f.bindTo, "bind-to", "core", "core: one CPU per rank when they fit (like mpirun); none")
	fs.StringVar(&f.algorithm, "algorithm", "auto", "allreduce program: auto (chosen by the cost model and measurement), ring, ring-pieces, two-level, ring-offload")
	fs.IntVar(&f.dumpPlan, "dump-plan", -1, "print the allreduce program of this rank for the largest size and exit")
	fs.IntVar(&f.dumpHosts, "hosts", 1, "with -dump-plan: the ranks run on this many hosts (np/hosts each)")
	fs.StringVar(&f.dumpLinks, "links", "", "with -dump-plan: the links between hosts as measured, e.g. 'link=3:rate=200mbit' (others 10 Gbit/s)")
}

// dumpBandwidth is the bandwidth matrix (bytes per second) of -links for
// np ranks on hosts of per ranks each: a link between two hosts runs at
// the lower of their rates (10 Gbit/s where no clause names a rank); nil
// without -links.
func (f *sweepFlags) dumpBandwidth(per int) ([][]float64, error) {
	if f.dumpLinks == "" {
		return nil, nil
	}
	spec, err := inject.Parse(f.dumpLinks)
	if err != nil {
		return nil, err
	}
	if err := spec.Validate(f.np); err != nil {
		return nil, err
	}
	rate := make([]float64, f.np)
	for r := range rate {
		rate[r] = 1.25e9
	}
	for _, l := range spec.Links {
		for _, r := range l.Ranks {
			if l.Rate > 0 {
				rate[r] = float64(l.Rate) / 8
			}
		}
	}
	bw := make([][]float64, f.np)
	for a := range bw {
		bw[a] = make([]float64, f.np)
		for b := range bw[a] {
			if a/per != b/per {
				bw[a][b] = min(rate[a], rate[b])
			}
		}
	}
	return bw, nil
}

func (f *sweepFlags) spec(coll string) (bench.Spec, error) {
	s := bench.Spec{Collective: coll, Root: f.root, Iters: f.iters, Warmup: f.warmup, Check: f.check}
	var err error
	if s.MinBytes, err = bench.ParseSize(f.minB); err != nil {
		return s, err
	}
	if s.MaxBytes, err = bench.ParseSize(f.maxB); err != nil {
		return s, err
	}
	if s.MinBytes > s.MaxBytes {
		defaultE := ""
		if f.maxB == defaultMaxSize {
			defaultE = " (the default)"
		}
		return s, fmt.Errorf("-b %s is larger than -e %s%s: give a larger -e too, e.g. -b %s -e %s",
			f.minB, f.maxB, defaultE, f.minB, f.minB)
	}
	if s.Factor, err = strconv.ParseInt(f.factor, 10, 64); err != nil || s.Factor < 2 {
		return s, fmt.Errorf("-f %q: the size factor must be a whole number ≥ 2", f.factor)
	}
	if s.DType, err = reduce.ParseDType(f.dtype); err != nil {
		return s, err
	}
	if s.Op, err = reduce.ParseOp(f.op); err != nil {
		return s, err
	}
	if f.np < 1 || f.np > 256 {
		return s, fmt.Errorf("-np %d: the number of ranks must be in 1..256, e.g. -np 4", f.np)
	}
	if f.root < 0 || f.root >= f.np {
		return s, fmt.Errorf("-r %d: the root must be a rank, 0..%d", f.root, f.np-1)
	}
	return s, s.Validate()
}

// workerArgs renders the flags for the bench-worker processes.
func (f *sweepFlags) workerArgs(coll string) []string {
	return []string{"bench-worker", coll, "-b", f.minB, "-e", f.maxB, "-f", f.factor, "-d", f.dtype, "-o", f.op,
		"-r", strconv.Itoa(f.root), "-iters", strconv.Itoa(f.iters), "-warmup", strconv.Itoa(f.warmup),
		"-check=" + strconv.FormatBool(f.check)}
}

func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		help := cli.New("ringtail bench", benchUsage)
		new(sweepFlags).register(help.Flags)
		if len(args) == 0 {
			help.Help(stderr)
			return 2
		}
		help.Help(stdout)
		return 0
	}
	switch args[0] {
	case "balance":
		return runBenchBalance(args[1:], stdout, stderr)
	case "straggler":
		return runBenchStraggler(args[1:], stdout, stderr)
	case "recovery":
		return runBenchRecovery(args[1:], stdout, stderr)
	case "gradcode":
		return runBenchGradcode(args[1:], stdout, stderr)
	}
	if !slices.Contains(bench.Collectives, args[0]) {
		fmt.Fprintf(stderr, "ringtail bench: unknown benchmark %q: want %s, balance, straggler, recovery or gradcode (run 'ringtail bench --help')\n",
			args[0], strings.Join(bench.Collectives, ", "))
		return 2
	}
	coll := args[0]
	cmd := cli.New("ringtail bench "+coll, fmt.Sprintf(benchCollectiveUsage, coll))
	fs := cmd.Flags
	var f sweepFlags
	f.register(fs)
	if code, ok := cmd.Parse(args[1:], stdout, stderr); !ok {
		return code
	}
	spec, err := f.spec(coll)
	if err != nil {
		return cmd.Fail(stderr, "%v", err)
	}
	if f.dumpPlan >= 0 {
		if coll != bench.AllReduce {
			return cmd.Fail(stderr, "--dump-plan prints allreduce programs only")
		}
		cfg := ringtail.DefaultConfig(f.dumpPlan, f.np)
		cfg.Channels, cfg.ChunkBytes, cfg.SmallBytes, cfg.PieceBytes, cfg.Pieces = f.channels, f.chunkBytes, f.smallBytes, f.pieceBytes, f.pieces
		cfg.DisableShm, cfg.DisableUnix, cfg.Algorithm = f.noShm, f.noUnix, f.algorithm
		if f.dumpHosts < 1 || f.np%f.dumpHosts != 0 {
			fmt.Fprintf(stderr, "ringtail bench: -hosts %d must divide -np %d\n", f.dumpHosts, f.np)
			return 2
		}
		cfg.LocalRank, cfg.LocalWorldSize = f.dumpPlan%(f.np/f.dumpHosts), f.np/f.dumpHosts
		cfg.MasterPort, cfg.Insecure = 1, true
		bw, err := f.dumpBandwidth(f.np / f.dumpHosts)
		if err != nil {
			fmt.Fprintf(stderr, "ringtail bench: -links: %v\n", err)
			return 2
		}
		text, err := ringtail.DumpPlan(cfg, int(spec.MaxBytes)/spec.DType.Size(), spec.DType, spec.Op, bw)
		if err != nil {
			fmt.Fprintf(stderr, "ringtail bench: %v\n", err)
			return 2
		}
		fmt.Fprint(stdout, text)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if world, ok := externalWorld(os.LookupEnv); ok {
		set := cmd.Given()
		if set["np"] && f.np != world {
			return cmd.Fail(stderr, "-np %d, but the launcher started %d ranks (WORLD_SIZE)", f.np, world)
		}
		return benchRank(ctx, coll, &f, set, !f.jsonOut, stdout, stderr)
	}
	if err := bench.CheckMemory(spec, f.np, bench.HostMemory()); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.Name, err)
		return 2
	}
	results := make(chan bench.Result)
	done := make(chan error, 1)
	go func() { done <- launchBench(ctx, &f, coll, results, stderr) }()
	progress := isatty.IsTerminal(os.Stderr.Fd()) && stderr == os.Stderr
	if !f.jsonOut {
		fmt.Fprintf(stdout, "# ringtail bench %s: %d ranks, %s, op %s, iters %d, warmup %d, channels %d, chunk %d, pieces %s of %d\n",
			coll, f.np, spec.DType, spec.Op, f.iters, f.warmup, f.channels, f.chunkBytes, f.pieces, f.pieceBytes)
		bench.WriteHeader(stdout)
	}
	for r := range results {
		if progress {
			fmt.Fprintf(stderr, "\r%d bytes done   ", r.SizeBytes)
		}
		if f.jsonOut {
			_ = bench.WriteJSON(stdout, r)
		} else {
			bench.WriteRow(stdout, r)
		}
	}
	if progress {
		fmt.Fprint(stderr, "\r                           \r")
	}
	if err := <-done; err != nil {
		fmt.Fprintf(stderr, "ringtail bench: %v\n", err)
		return 1
	}
	return 0
}

// launchBench starts np local bench-worker ranks of this executable
// through the launcher and streams rank 0's results (JSON lines).
func launchBench(ctx context.Context, f *sweepFlags, coll string, results chan<- bench.Result, stderr io.Writer) error {
	defer close(results)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	out := &jsonLines{results: results}
	code, err := launch.Run(ctx, launch.Config{
		NP: f.np, Command: append([]string{self}, f.workerArgs(coll)...), Name: "ringtail bench",
		Env: []string{"RINGTAIL_CHANNELS=" + strconv.Itoa(f.channels), "RINGTAIL_CHUNK_BYTES=" + strconv.Itoa(f.chunkBytes),
			"RINGTAIL_SMALL_BYTES=" + strconv.Itoa(f.smallBytes), "RINGTAIL_PIECE_BYTES=" + strconv.Itoa(f.pieceBytes),
			"RINGTAIL_PIECES=" + f.pieces, "RINGTAIL_ALGORITHM=" + f.algorithm,
			"RINGTAIL_NO_UNIX=" + strconv.FormatBool(f.noUnix),
			"RINGTAIL_NO_SHM=" + strconv.FormatBool(f.noShm)},
		Stdout: out, Stderr: stderr, Logger: zerolog.Nop(), BindTo: f.bindTo,
	})
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("ranks failed (exit status %d)", code)
	}
	return nil
}

// jsonLines turns the ranks' stdout (one line per Write, unprefixed) into
// results; only rank 0 prints any.
type jsonLines struct{ results chan<- bench.Result }

func (j *jsonLines) Write(b []byte) (int, error) {
	var r bench.Result
	if json.Unmarshal(bytes.TrimSpace(b), &r) == nil && r.Collective != "" {
		j.results <- r
	}
	return len(b), nil
}

// externalWorld reports whether this process was started as a rank by a
// launcher, and the world size: RANK (or a Kubernetes Indexed Job's
// JOB_COMPLETION_INDEX) with WORLD_SIZE, or a task of a Slurm job step
// (srun -n 4 ringtail bench ...), as ringtail.ConfigFromLookup reads them.
func externalWorld(lookup func(string) (string, bool)) (int, bool) {
	_, rank := lookup(ringtail.EnvRank)
	_, index := lookup(ringtail.EnvJobCompletionIndex)
	if !rank && !index {
		if task, ok, err := slurm.TaskFromLookup(lookup); ok && err == nil {
			return task.World, true
		}
		return 0, false
	}
	v, ok := lookup(ringtail.EnvWorldSize)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// runBenchWorker is one rank of `ringtail bench`: it joins the job from
// the environment and prints rank 0's results as JSON lines.
func runBenchWorker(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "ringtail bench-worker: missing collective")
		return 2
	}
	coll := args[0]
	cmd := cli.New("ringtail bench-worker", "Usage: ringtail bench-worker COLLECTIVE [flags] (started by ringtail bench)\n")
	var f sweepFlags
	f.register(cmd.Flags)
	if code, ok := cmd.Parse(args[1:], stdout, stderr); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return benchRank(ctx, coll, &f, nil, false, stdout, stderr)
}

// benchRank runs one rank of a sweep in a job whose membership comes from
// the environment. The flags named in set override the environment's
// channels, chunk, small-message threshold and socket choices. Rank 0
// prints each size as soon as it is measured: an nccl-tests table when
// table is set, else JSON lines.
func benchRank(ctx context.Context, coll string, f *sweepFlags, set map[string]bool, table bool, stdout, stderr io.Writer) int {
	cfg, err := ringtail.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if set["channels"] {
		cfg.Channels = f.channels
	}
	if set["chunk"] {
		cfg.ChunkBytes = f.chunkBytes
	}
	if set["small"] {
		cfg.SmallBytes = f.smallBytes
	}
	if set["piece"] {
		cfg.PieceBytes = f.pieceBytes
	}
	if set["pieces"] {
		cfg.Pieces = f.pieces
	}
	if set["algorithm"] {
		cfg.Algorithm = f.algorithm
	}
	if set["no-unix"] {
		cfg.DisableUnix = f.noUnix
	}
	if set["no-shm"] {
		cfg.DisableShm = f.noShm
	}
	f.np = cfg.WorldSize
	spec, err := f.spec(coll)
	if err != nil {
		fmt.Fprintf(stderr, "ringtail bench: %v\n", err)
		return 2
	}
	// The ranks of this host share its memory: check it before the first
	// allocation (a rank started by hand counts itself only).
	if err := bench.CheckMemory(spec, max(cfg.LocalWorldSize, 1), bench.HostMemory()); err != nil {
		fmt.Fprintf(stderr, "ringtail bench: rank %d: %v\n", cfg.Rank, err)
		return 2
	}
	comm, err := ringtail.New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer comm.Close()
	rank0 := comm.Rank() == 0
	if rank0 && table {
		fmt.Fprintf(stdout, "# ringtail bench %s: %d ranks (from the launcher), %s, op %s, iters %d, warmup %d, channels %d, chunk %d\n",
			coll, cfg.WorldSize, spec.DType, spec.Op, f.iters, f.warmup, cfg.Channels, cfg.ChunkBytes)
		bench.WriteHeader(stdout)
	}
	spec.Each = func(r bench.Result) {
		switch {
		case !rank0:
		case table:
			bench.WriteRow(stdout, r)
		default:
			_ = bench.WriteJSON(stdout, r)
		}
	}
	if _, err := bench.Run(ctx, comm, spec); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

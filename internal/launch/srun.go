package launch

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Launchers (Config.Launcher): how the ranks are started.
const (
	// LauncherDirect ("" too): local processes, and SSH for remote hosts.
	LauncherDirect = "direct"
	// LauncherSrun: one Slurm job step, `srun`, inside the allocation
	// whose nodes Config.Hosts lists (see SrunCommand).
	LauncherSrun = "srun"
)

// DefaultSrun is the srun command Run uses when Config.Srun is empty.
func DefaultSrun() []string { return []string{"srun"} }

// SrunStep is what SrunCommand needs to start every rank of a job as one
// Slurm job step.
type SrunStep struct {
	// NP is the number of ranks (srun's --ntasks).
	NP int
	// Dir is the ranks' working directory (srun's --chdir); empty:
	// srun's.
	Dir string
	// Command is the rank command, the same for every rank.
	Command []string
	// Interfaces pins each rank's data plane as RemoteRank.Interfaces
	// does.
	Interfaces []string
	// MetricsPort, when positive, has each rank serve its metrics on
	// every interface at MetricsPort + its local rank
	// (RINGTAIL_METRICS_ADDR), as Config.MetricsPort does for remote
	// ranks: behind the job's endpoint token (obs.Token of the job
	// secret the ranks get).
	MetricsPort int
	// ExitMarker starts the line a rank's wrapper writes to standard
	// error when the rank exits non-zero on its own (not stopped by a
	// signal to the step): "MARKER STATUS NODE". Run makes it unique per
	// job and reads it back from srun's labelled output.
	ExitMarker string
}

// SrunCommand returns the argv that starts a job's ranks as one Slurm job
// step, with srun (plus any flags of the user's in srun[1:]):
//
//	srun --ntasks=NP --kill-on-bad-exit=1 --export=ALL [FLAGS] --label [--chdir=DIR] sh -c <script> ringtail-rank CMD ARGS...
//
// Slurm places the tasks (block distribution over the allocation) and
// every task runs the same POSIX sh script, which
//   - exports RANK, LOCAL_RANK and LOCAL_WORLD_SIZE from the task's
//     SLURM_PROCID, SLURM_LOCALID and the step's tasks on its node
//     (SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID); the variables the
//     ranks share (WORLD_SIZE, MASTER_ADDR, ..., the secret) reach them
//     through srun's environment (--export=ALL);
//   - pins the data plane as RemoteRank.Interfaces does;
//   - runs the command with standard input from /dev/null and exits with
//     its status; on SIGTERM (the step being stopped) it passes the
//     signal on;
//   - when the command exits non-zero on its own, writes
//     "ExitMarker STATUS NODE" to standard error, which --label turns into
//     "RANK: ExitMarker STATUS NODE": so the launcher learns which rank
//     failed first, which srun's own status (the highest of the tasks')
//     does not say.
//
// --kill-on-bad-exit=1 has Slurm stop the step when a rank fails. It is a
// pure function.
func SrunCommand(srun []string, s SrunStep) []string {
	argv := []string{srun[0], "--ntasks=" + strconv.Itoa(s.NP), "--kill-on-bad-exit=1", "--export=ALL"}
	argv = append(argv, srun[1:]...)
	argv = append(argv, "--label")
	if s.Dir != "" {
		argv = append(argv, "--chdir="+s.Dir)
	}
	argv = append(argv, "sh", "-c", srunScript(s), "ringtail-rank")
	return append(argv, s.Command...)
}

// srunScript is the sh program each task of the step runs; the command is
// its positional parameters.
func srunScript(s SrunStep) string {
	var b strings.Builder
	b.WriteString("export " + EnvRank + "=\"$SLURM_PROCID\" " + EnvLocalRank + "=\"$SLURM_LOCALID\"\n")
	// LOCAL_WORLD_SIZE: the entry of "2(x3),1" that covers SLURM_NODEID.
	b.WriteString(EnvLocalWorldSize + "=1 n=0\n")
	b.WriteString("IFS=,; set -f\n")
	b.WriteString("for e in ${SLURM_STEP_TASKS_PER_NODE:-$SLURM_TASKS_PER_NODE}; do\n")
	b.WriteString("  c=${e%%(*} r=1\n")
	b.WriteString("  case $e in *'(x'*) r=${e#*'(x'} r=${r%')'};; esac\n")
	b.WriteString("  n=$((n + r))\n")
	b.WriteString("  if [ \"${SLURM_NODEID:-0}\" -lt \"$n\" ]; then " + EnvLocalWorldSize + "=$c; break; fi\n")
	b.WriteString("done\n")
	b.WriteString("unset IFS; set +f\n")
	b.WriteString("export " + EnvLocalWorldSize + "\n")
	if len(s.Interfaces) > 0 {
		b.WriteString(interfaceScript(s.Interfaces))
	}
	if s.MetricsPort > 0 {
		b.WriteString("export " + EnvMetricsAddr + "=\"0.0.0.0:$((" + strconv.Itoa(s.MetricsPort) + " + ${SLURM_LOCALID:-0}))\"\n")
	}
	// The trap comes first, so that a signal arriving while the command
	// starts is passed on, not lost with the wrapper.
	b.WriteString("p= stopped=\n")
	b.WriteString("trap 'stopped=1; [ -n \"$p\" ] && kill -TERM $p 2>/dev/null' HUP INT TERM\n")
	b.WriteString("\"$@\" &\n")
	b.WriteString("p=$!\n")
	b.WriteString("[ -n \"$stopped\" ] && kill -TERM $p 2>/dev/null\n")
	b.WriteString("while :; do wait $p; s=$?; kill -0 $p 2>/dev/null || break; done\n")
	b.WriteString("if [ $s -ne 0 ] && [ -z \"$stopped\" ]; then\n")
	b.WriteString("  echo " + shellQuote(s.ExitMarker) + " $s \"${SLURMD_NODENAME:-$(hostname)}\" >&2\n")
	b.WriteString("fi\n")
	b.WriteString("exit $s\n")
	return b.String()
}

// interfaceScript exports RINGTAIL_LISTEN_IP as the first IPv4 address of
// the first of names that has one on this host (read with ip), or exits
// 126 saying none has.
func interfaceScript(names []string) string {
	var b strings.Builder
	b.WriteString("a=\nfor i in " + shellJoin(names) + "; do\n")
	b.WriteString("  a=$(ip -o -4 addr show dev \"$i\" 2>/dev/null | sed -n 's/.* inet \\([0-9.]*\\).*/\\1/p' | head -n 1)\n")
	b.WriteString("  [ -n \"$a\" ] && break\ndone\n")
	b.WriteString("[ -n \"$a\" ] || { echo \"ringtail run: $(hostname): no IPv4 address on network interface " +
		strings.ReplaceAll(strings.Join(names, ","), "\"", "") + " (read with ip from iproute2)\" >&2; exit 126; }\n")
	b.WriteString("export " + EnvListenIP + "=\"$a\"\n")
	return b.String()
}

// srunEnv is srun's environment, which it exports to every task: the
// launcher's own, less any contract variable an outer launcher left in
// it, then extra (Config.Env), then the job's variables.
func srunEnv(base, extra []string, je jobEnv, secretVar string) []string {
	env := make([]string, 0, len(base)+len(extra)+12)
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if !reservedEnv(name) && name != EnvListenIP && name != EnvMetricsAddr && name != EnvTimeline {
			env = append(env, kv)
		}
	}
	env = append(env, extra...)
	env = append(env, jobVars(je)...)
	if je.Timeline != "" {
		env = append(env, EnvTimeline+"="+je.Timeline)
	}
	return append(env, secretVar)
}

// srunDemux splits srun's labelled output ("  2: text") into the ranks'
// streams. Lines without a label (srun's own messages) go to other; on
// standard error, a rank's exit-marker line is not passed on but reported
// to failed. It is used by one goroutine.
type srunDemux struct {
	ranks  []*lineWriter
	other  *lineWriter
	marker []byte // "MARKER " (stderr only)
	failed func(rank, status int, node string)

	buf  []byte
	cont *lineWriter // where the rest of a line cut at maxLine goes
}

var _ flushWriter = (*srunDemux)(nil)

// Write consumes p; it never fails.
func (d *srunDemux) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		end := bytes.IndexByte(p, '\n')
		if end < 0 {
			take := min(len(p), maxLine-len(d.buf))
			d.buf = append(d.buf, p[:take]...)
			p = p[take:]
			if len(d.buf) == maxLine {
				d.line(false)
			}
			continue
		}
		d.buf = append(d.buf, p[:end]...)
		p = p[end+1:]
		d.line(true)
	}
	return n, nil
}

// Flush passes on a last line that lacked its newline.
func (d *srunDemux) Flush() {
	if len(d.buf) > 0 {
		d.line(true)
	}
}

// line routes the buffered line; whole is false when the line was cut at
// maxLine and continues.
func (d *srunDemux) line(whole bool) {
	dst, text := d.cont, d.buf
	if dst == nil {
		dst = d.other
		if rank, rest, ok := cutLabel(d.buf); ok && rank < len(d.ranks) {
			dst, text = d.ranks[rank], rest
			if whole && d.marker != nil && bytes.HasPrefix(rest, d.marker) {
				if f := strings.Fields(string(rest[len(d.marker):])); len(f) == 1 || len(f) == 2 {
					if status, err := strconv.Atoi(f[0]); err == nil {
						d.failed(rank, status, strings.Join(f[1:], ""))
						d.buf = d.buf[:0]
						return
					}
				}
			}
		}
	}
	dst.Write(text)
	if whole {
		dst.Write([]byte{'\n'})
		d.cont = nil
	} else {
		dst.Flush()
		d.cont = dst
	}
	d.buf = d.buf[:0]
}

// cutLabel splits srun's --label prefix, spaces, a task number and ": ",
// from line.
func cutLabel(line []byte) (int, []byte, bool) {
	rest := bytes.TrimLeft(line, " ")
	i := 0
	for i < len(rest) && i < 7 && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || !bytes.HasPrefix(rest[i:], []byte(": ")) {
		return 0, nil, false
	}
	n, err := strconv.Atoi(string(rest[:i]))
	if err != nil {
		return 0, nil, false
	}
	return n, rest[i+2:], true
}

// isSrun reports whether cfg starts its ranks with srun.
func (c *Config) isSrun() bool { return c.Launcher == LauncherSrun }

// srunSpec builds the start specification of the job step.
func (j *job) srunSpec(je jobEnv, dir string, exits chan<- rankExit, logs *rankLogs, failed chan<- rankExit) spec {
	cfg := j.cfg
	marker := "ringtail-rank-exit:" + cfg.JobID
	demux := func(stderr bool) *srunDemux {
		d := &srunDemux{other: &lineWriter{out: j.out, dst: j.out.stdout}}
		if stderr {
			d.other.dst = j.out.stderr
			d.marker = []byte(marker + " ")
			d.failed = func(rank, status int, node string) {
				select {
				case failed <- rankExit{place: placement{Rank: rank, Host: node, Remote: true}, status: status}:
				default: // the first failures are enough
				}
			}
		}
		for r := range cfg.NP {
			d.ranks = append(d.ranks, j.out.stream(r, stderr, logs.file(r, stderr)))
		}
		return d
	}
	secretVar := EnvSecret + "=" + string(cfg.Secret)
	if cfg.SecretFile != "" {
		secretVar = EnvSecretFile + "=" + cfg.SecretFile
	}
	step := SrunStep{NP: cfg.NP, Dir: cfg.Dir, Command: cfg.Command, Interfaces: cfg.Interfaces, MetricsPort: cfg.MetricsPort, ExitMarker: marker}
	return spec{
		place: placement{Rank: -1, Host: "srun"},
		argv:  SrunCommand(cfg.Srun, step),
		env:   srunEnv(os.Environ(), cfg.Env, je, secretVar),
		dir:   dir, grace: cfg.Grace, exits: exits, cpu: -1,
		stdout: demux(false), stderr: demux(true),
	}
}

// srunFirstRemote returns the first host of the allocation that is not this
// one ("" when all are): the coordinator's address is the one that routes
// there.
func srunFirstRemote(hosts []HostSlots, isLocal func(string) bool) string {
	i := slices.IndexFunc(hosts, func(h HostSlots) bool { return !isLocal(h.Host) })
	if i < 0 {
		return ""
	}
	return hosts[i].Host
}

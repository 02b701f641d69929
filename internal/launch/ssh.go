package launch

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultSSH is the ssh client command Run uses for remote hosts when
// Config.SSH is empty: batch mode, so a missing key fails at once instead
// of prompting for a password.
func DefaultSSH() []string { return []string{"ssh", "-o", "BatchMode=yes"} }

// RemoteRank is what SSHCommand needs to start one rank on a remote host.
type RemoteRank struct {
	Host string
	// Dir is the working directory on the remote host; empty: ssh's
	// default (the login directory).
	Dir string
	// Env holds K=V pairs exported before Command runs. The job secret is
	// not among them: it is read from ssh's standard input (see
	// SSHCommand).
	Env     []string
	Command []string
	// Grace is how long the remote rank has between SIGTERM and SIGKILL
	// once the launcher lets go of it (rounded up to whole seconds).
	Grace time.Duration
	// Interfaces, when set, pins the rank's data plane: the script exports
	// RINGTAIL_LISTEN_IP as the first IPv4 address of the first of these
	// network interfaces that has one on the remote host (read with `ip`
	// from iproute2), and exits 126 with a message when none has.
	Interfaces []string
}

// SSHCommand returns the argv of the local process that runs one rank on
// r.Host: ssh followed by the host and a single remote command,
//
//	sh -c '<script>'
//
// quoted for the remote login shell. The script
//   - reads one line from standard input and exports it as
//     RINGTAIL_SECRET, so the secret never appears on a command line
//     (neither in the local ssh's argv nor in the remote ps);
//   - cd's to r.Dir (exit 127 if it cannot), exports r.Env;
//   - runs r.Command with standard input from /dev/null, and exits with
//     its status (128+signo if a signal killed it);
//   - watches standard input: when it reaches end of file — the launcher
//     closed it to stop the rank, or the launcher or the ssh connection
//     died — it sends the rank SIGTERM and, if it still runs r.Grace
//     later, SIGKILL.
//
// The launcher therefore writes the secret and a newline to ssh's
// standard input and keeps it open while the rank should run. SSHCommand
// is a pure function.
func SSHCommand(ssh []string, r RemoteRank) []string {
	argv := slices.Clone(ssh)
	return append(argv, r.Host, "sh -c "+shellQuote(remoteScript(r)))
}

// ExecCommand is SSHCommand for an agent that runs its arguments as a
// program instead of handing one command line to a remote login shell:
// `ip netns exec` (hosts named after network namespaces), `docker exec`,
// `kubectl exec POD --`. It returns the agent, the host and
//
//	sh -c <script>
//
// as three separate words, the script unquoted, with the same script and
// the same contract on standard input as SSHCommand. It is a pure
// function.
func ExecCommand(agent []string, r RemoteRank) []string {
	argv := slices.Clone(agent)
	return append(argv, r.Host, "sh", "-c", remoteScript(r))
}

// WatchedCommand is ExecCommand without an agent: the argv that runs
// r.Command on this host under the same script, `sh -c <script>`, with
// the same contract on standard input (the secret as its first line; end
// of input stops the rank: SIGTERM, SIGKILL after r.Grace). A launcher
// that starts local ranks this way leaves none behind even if it is
// killed: its end of the pipe closes with it. r.Host is not used. It is a
// pure function.
func WatchedCommand(r RemoteRank) []string {
	return []string{"sh", "-c", remoteScript(r)}
}

// SSH modes (Config.SSHMode): how the remote command is handed to the
// ssh command.
const (
	// SSHModeAuto: SSHModeShell when a word of the ssh command names a
	// program with "ssh" in its name (ssh, /usr/bin/ssh, autossh,
	// sshpass -p x ssh), SSHModeExec otherwise.
	SSHModeAuto = "auto"
	// SSHModeShell: one command line for a remote login shell (ssh).
	SSHModeShell = "shell"
	// SSHModeExec: the words of the command as separate arguments, run
	// as a program (ip netns exec, docker exec, kubectl exec --).
	SSHModeExec = "exec"
)

// AgentExecs reports whether the ssh command ssh, in mode ("" is
// SSHModeAuto), runs its arguments as a program (ExecCommand) rather than
// through a remote login shell (SSHCommand). It is a pure function.
func AgentExecs(ssh []string, mode string) bool {
	switch mode {
	case SSHModeShell:
		return false
	case SSHModeExec:
		return true
	}
	for _, w := range ssh {
		if i := strings.LastIndexByte(w, '/'); i >= 0 {
			w = w[i+1:]
		}
		if strings.Contains(w, "ssh") {
			return false
		}
	}
	return len(ssh) > 0
}

// remoteScript is the POSIX sh program SSHCommand runs on the remote host.
func remoteScript(r RemoteRank) string {
	grace := int((r.Grace + time.Second - 1) / time.Second)
	grace = max(grace, 1)
	var b strings.Builder
	b.WriteString("IFS= read -r " + EnvSecret + " || exit 126\n")
	b.WriteString("export " + EnvSecret + "\n")
	if r.Dir != "" {
		b.WriteString("cd " + shellQuote(r.Dir) + " || exit 127\n")
	}
	for _, kv := range r.Env {
		b.WriteString("export " + shellQuote(kv) + "\n")
	}
	if len(r.Interfaces) > 0 {
		b.WriteString(interfaceScript(r.Interfaces))
	}
	// fd 3 keeps the launcher's pipe for the watcher: an asynchronous
	// command's standard input is /dev/null in a non-interactive shell.
	b.WriteString("exec 3<&0\n")
	b.WriteString(shellJoin(r.Command) + " 3<&- </dev/null &\n")
	b.WriteString("p=$!\n")
	b.WriteString("trap 'kill -TERM $p 2>/dev/null' HUP INT TERM\n")
	// The watcher: on end of input, SIGTERM; then up to grace seconds
	// (one-second naps, so that it lingers at most a second after the
	// rank is gone); then SIGKILL.
	b.WriteString("{ while IFS= read -r _ <&3; do :; done; kill -TERM $p; i=0\n")
	b.WriteString("  while [ $i -lt " + strconv.Itoa(grace) + " ] && kill -0 $p; do sleep 1; i=$((i+1)); done\n")
	b.WriteString("  kill -KILL $p; } >/dev/null 2>&1 &\n")
	b.WriteString("w=$!\n")
	b.WriteString("exec 3<&-\n")
	// wait returns early when a trapped signal arrives; wait again until
	// the rank is really gone.
	b.WriteString("while :; do wait $p; s=$?; kill -0 $p 2>/dev/null || break; done\n")
	b.WriteString("kill $w 2>/dev/null\n")
	b.WriteString("exit $s\n")
	return b.String()
}

// shellJoin quotes each word for a POSIX shell and joins them with spaces.
func shellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

// shellQuote returns s as one word for a POSIX shell: unchanged when it
// holds only characters no shell treats specially, otherwise in single
// quotes (a quote inside becomes '"'"').
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(c rune) bool { return !shellSafe(c) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

func shellSafe(c rune) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	// Not '=' (a leading word with it is an assignment) nor '~' (tilde
	// expansion).
	return strings.ContainsRune("_-+.,/:@%", c)
}

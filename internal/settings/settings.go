package settings

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Prefix starts every name of the table.
const Prefix = "RINGTAIL_"

// Setting is one variable of the table.
type Setting struct {
	// Name is the variable, e.g. RINGTAIL_NO_SHM.
	Name string
	// ReadBy says where it is read (or set, for a variable the project
	// hands to the processes it starts).
	ReadBy string
}

// Known returns the table of the RINGTAIL_* variables the project
// reads or sets besides a communicator's own (those are declared once,
// with their defaults and checks, in internal/envcfg's Table, and come
// to Unknown from there): the logger's, the elastic layer's, the
// launcher's, the PyTorch package's, the tools' and the tests'
// switches. A test checks that every RINGTAIL_* name in the repository
// (Go, Python, shell, docs) is here or in envcfg's table. The slice is
// new on each call.
func Known() []Setting {
	const (
		logs    = "the logger (internal/logging)"
		elastic = "the elastic layer (elastic.ConfigFromEnv)"
		torch   = "the PyTorch package (integration/torch)"
		tests   = "a test or benchmark switch"
	)
	return []Setting{
		{"RINGTAIL_LOG_LEVEL", logs},
		{"RINGTAIL_LOG_FORMAT", logs},
		{"RINGTAIL_ELASTIC", elastic},
		{"RINGTAIL_ELASTIC_ID", elastic},
		{"RINGTAIL_ELASTIC_BIND", elastic},
		{"RINGTAIL_ELASTIC_SEEDS", elastic},
		{"RINGTAIL_ELASTIC_NP", elastic},
		{"RINGTAIL_ELASTIC_MIN_NP", elastic},
		{"RINGTAIL_ELASTIC_MAX_NP", elastic},
		{"RINGTAIL_ELASTIC_START_TIMEOUT", elastic},
		{"RINGTAIL_ELASTIC_MIN_WAIT", elastic},
		{"RINGTAIL_SHARD_SERVICE", elastic},
		{"RINGTAIL_INJECT", "the straggler injector (straggler/inject)"},
		{"RINGTAIL_MEM_CAP", "ringtail-train's device memory cap (cmd/ringtail-train --mem-cap)"},
		{"RINGTAIL_SAMPLE_BYTES", "ringtail-train's activation bytes per sample (cmd/ringtail-train --sample-bytes)"},
		{"RINGTAIL_FAKE_GPU", "ringtail-train's NVML mock devices (cmd/ringtail-train --fake-gpu)"},
		{"RINGTAIL_DDP_STRAGGLER", torch},
		{"RINGTAIL_DDP_STRAGGLER_TIMEOUT", torch},
		{"RINGTAIL_DDP_STRAGGLER_WATCH", torch},
		{"RINGTAIL_TORCH_AUTOLOAD", torch},
		{"RINGTAIL_LIB", torch},
		{"RINGTAIL_SKIP_GO_BUILD", "the PyTorch package's build (integration/torch/setup.py)"},
		{"RINGTAIL_BIN", tests},
		{"RINGTAIL_TEST_PYTHON", tests},
		{"RINGTAIL_TEST_ROLE", tests},
		{"RINGTAIL_TEST_RECOVERY_ARGS", tests},
		{"RINGTAIL_ELASTIC_ROLE", tests},
		{"RINGTAIL_ELASTIC_BENCH_ELEMS", tests},
		{"RINGTAIL_ELASTIC_BENCH_LOG", tests},
		{"RINGTAIL_ELASTIC_BENCH_PACE", tests},
		{"RINGTAIL_ELASTIC_BENCH_STEPS", tests},
		{"RINGTAIL_ELASTIC_TEST_ROLE", tests},
		{"RINGTAIL_ELASTIC_TEST_SHARD_ADDR", tests},
		{"RINGTAIL_ELASTIC_TEST_SHARD_DIR", tests},
		{"RINGTAIL_ELASTIC_TEST_TRAINED_DIR", tests},
		{"RINGTAIL_INJECT_TEST_HELPER", tests},
		{"RINGTAIL_NVML_REAL", tests},
		{"RINGTAIL_NVML_LIBRARY", tests},
		{"RINGTAIL_GRADCODE_TABLE", tests},
		{"RINGTAIL_WAL_CRASH_DIR", tests},
		{"RINGTAIL_SLURM_TEST", tests},
		{"RINGTAIL_DASHBOARD_SCREENSHOT", tests},
	}
}

// BoolValues names the values ParseBool accepts.
const BoolValues = "1/0, true/false, yes/no or on/off"

// BoolError is ParseBool's error: Name holds Value, which is not one of
// BoolValues.
type BoolError struct {
	Name, Value string
}

// Error names the variable, its value and the accepted values.
func (e *BoolError) Error() string {
	return fmt.Sprintf("%s=%q is not a boolean: use %s", e.Name, e.Value, BoolValues)
}

// ParseBool parses the value of the boolean variable name: 1, true, yes
// and on are true, 0, false, no and off false (case and surrounding space
// ignored), "" is def; anything else is a *BoolError. Every RINGTAIL_*
// boolean is read through it.
func ParseBool(name, value string, def bool) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "":
		return def, nil
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return def, &BoolError{Name: name, Value: value}
}

// MinSecretLen is the shortest job secret accepted, in bytes.
const MinSecretLen = 16

// MakeSecret is the command CheckSecret's error suggests to make a job
// secret.
const MakeSecret = "head -c 32 /dev/urandom | base64"

// ErrShortSecret is wrapped by CheckSecret's error for a secret shorter
// than MinSecretLen.
var ErrShortSecret = errors.New("the job secret is too short")

// ErrTwoSecrets is the error of a process given its job secret twice,
// RINGTAIL_SECRET and RINGTAIL_SECRET_FILE both set (and not empty):
// neither silently wins.
var ErrTwoSecrets = errors.New("RINGTAIL_SECRET and RINGTAIL_SECRET_FILE are both set: set one of them")

// CheckSecret refuses a job secret shorter than MinSecretLen bytes (an
// empty one included), saying how to make one.
func CheckSecret(secret []byte) error {
	if len(secret) < MinSecretLen {
		return fmt.Errorf("%w: it has %d bytes, at least %d are needed (make one with `%s`)",
			ErrShortSecret, len(secret), MinSecretLen, MakeSecret)
	}
	return nil
}

// Unknown returns one line for each variable of environ (NAME=VALUE
// entries, as os.Environ gives them) whose name starts with Prefix but is
// neither in Known nor among runtime (a communicator's variables,
// envcfg.Names), naming the known name nearest to it, e.g.
// "RINGTAIL_NO_SHMM is not a ringtail setting; did you mean
// RINGTAIL_NO_SHM?". Lines come in the order of environ.
func Unknown(environ []string, runtime ...string) []string {
	var known []Setting
	for _, name := range runtime {
		if strings.HasPrefix(name, Prefix) {
			known = append(known, Setting{Name: name, ReadBy: "the runtime (ringtail.ConfigFromEnv, internal/envcfg)"})
		}
	}
	known = append(known, Known()...)
	var lines []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, Prefix) || slices.ContainsFunc(known, func(s Setting) bool { return s.Name == name }) {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s is not a ringtail setting; did you mean %s?", name, nearest(name, known)))
	}
	return lines
}

// nearest returns the name of known at the least edit distance from
// name (the first of the table on a tie).
func nearest(name string, known []Setting) string {
	best, bestDist := "", -1
	for _, s := range known {
		if d := editDistance(name, s.Name); bestDist < 0 || d < bestDist {
			best, bestDist = s.Name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

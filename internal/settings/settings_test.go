package settings_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/envcfg"
	"github.com/ringtail-ml/ringtail/internal/settings"
)

// misspelt are the names tests and docs misspell on purpose, to show
// the warning; they must never be in the table.
var misspelt = []string{"RINGTAIL_NO_SHMM", "RINGTAIL_SECRT", "RINGTAIL_LOGLEVEL", "RINGTAIL_ELASTIC_MINNP", "RINGTAIL_X", "RINGTAIL_TIMEOUTS"}

// Every RINGTAIL_* name the repository's files mention (Go, Python,
// shell, C, docs, manifests) is in the table, so that none the project
// itself uses is warned about; the exceptions are a C include guard,
// prefixes that stand for a family and the misspellings above.
func TestTheTableHoldsEveryNameTheRepositoryUses(t *testing.T) {
	root := filepath.Join("..", "..")
	notSettings := append([]string{"RINGTAIL_H"}, misspelt...) // RINGTAIL_H: integration/capi/include/ringtail.h's include guard
	word := regexp.MustCompile(`RINGTAIL_[A-Z0-9_]*`)
	used := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".py", ".sh", ".c", ".h", ".md", ".yaml", ".yml", ".toml", ".cfg", ".txt", ".service":
		default:
			if d.Name() != "Makefile" && d.Name() != "Dockerfile" {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range word.FindAllString(string(b), -1) {
			if strings.HasSuffix(m, "_") || slices.Contains(notSettings, m) {
				continue // a prefix (RINGTAIL_ELASTIC_*, RINGTAIL_*) or not a variable
			}
			if _, seen := used[m]; !seen {
				used[m] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(used) < 20 {
		t.Fatalf("found only %d names from %s: not the repository's root?", len(used), root)
	}
	known := settings.Known()
	runtime := envcfg.Names()
	for name, path := range used {
		if !slices.ContainsFunc(known, func(s settings.Setting) bool { return s.Name == name }) && !slices.Contains(runtime, name) {
			t.Errorf("%s (in %s) is neither in settings.Known nor in envcfg's table: add it, or every process would warn about it", name, path)
		}
	}
	seen := map[string]bool{}
	for _, s := range known {
		if slices.Contains(misspelt, s.Name) {
			t.Errorf("%s is a misspelling the tests use, yet in the table", s.Name)
		}
		if seen[s.Name] || !strings.HasPrefix(s.Name, settings.Prefix) || s.ReadBy == "" {
			t.Errorf("table entry %+v: repeated, not %s*, or without a reader", s, settings.Prefix)
		}
		seen[s.Name] = true
	}
	for _, name := range runtime {
		if seen[name] || slices.Contains(misspelt, name) {
			t.Errorf("%s: in envcfg's table and settings.Known both, or a misspelling the tests use", name)
		}
		seen[name] = true
	}
}

func TestParseBoolAcceptsAFixedSetAndRefusesTheRest(t *testing.T) {
	for _, tc := range []struct {
		value string
		def   bool
		want  bool
	}{
		{"", false, false}, {"", true, true}, {" ", true, true},
		{"1", false, true}, {"true", false, true}, {"TRUE", false, true}, {"Yes", false, true}, {"on", false, true}, {" On ", false, true},
		{"0", true, false}, {"false", true, false}, {"False", true, false}, {"NO", true, false}, {"off", true, false},
	} {
		got, err := settings.ParseBool("RINGTAIL_X", tc.value, tc.def)
		if err != nil || got != tc.want {
			t.Errorf("ParseBool(%q, default %t) = %t, %v; want %t", tc.value, tc.def, got, err, tc.want)
		}
	}
	for _, bad := range []string{"2", "y", "n", "enable", "treu", "-1", "none"} {
		_, err := settings.ParseBool("RINGTAIL_NO_SHM", bad, false)
		var be *settings.BoolError
		if !errors.As(err, &be) || be.Name != "RINGTAIL_NO_SHM" || !strings.Contains(err.Error(), settings.BoolValues) {
			t.Errorf("ParseBool(%q) = %v, want a *settings.BoolError naming the variable and %s", bad, err, settings.BoolValues)
		}
	}
}

func TestUnknownNamesTheNearestKnownName(t *testing.T) {
	got := settings.Unknown([]string{
		"PATH=/bin", "RINGTAIL_NO_SHM=1", "RINGTAIL_NO_SHMM=1", "RINGTAIL_SECRT=x", "RINGTAIL_TIMEOUT=5m",
		"RINGTAIL_LOGLEVEL=debug", "NCCL_ALGO=ring", "RINGTAIL_ELASTIC_MINNP=2",
	}, envcfg.Names()...)
	want := []string{
		"RINGTAIL_NO_SHMM is not a ringtail setting; did you mean RINGTAIL_NO_SHM?",
		"RINGTAIL_SECRT is not a ringtail setting; did you mean RINGTAIL_SECRET?",
		"RINGTAIL_LOGLEVEL is not a ringtail setting; did you mean RINGTAIL_LOG_LEVEL?",
		"RINGTAIL_ELASTIC_MINNP is not a ringtail setting; did you mean RINGTAIL_ELASTIC_MIN_NP?",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Unknown:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckSecretRefusesShortSecrets(t *testing.T) {
	for _, s := range []string{"", "s", "fifteen-bytes!!"} {
		err := settings.CheckSecret([]byte(s))
		if !errors.Is(err, settings.ErrShortSecret) || !strings.Contains(err.Error(), settings.MakeSecret) {
			t.Errorf("CheckSecret(%q) = %v, want settings.ErrShortSecret saying %s", s, err, settings.MakeSecret)
		}
	}
	if err := settings.CheckSecret([]byte("sixteen-bytes-ok")); err != nil {
		t.Fatalf("a 16-byte secret: %v", err)
	}
}

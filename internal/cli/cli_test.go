package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func testCommand() (*Command, *int, *time.Duration) {
	c := New("ringtail thing", "Usage: ringtail thing [flags]\n\nDoes a thing.\n")
	np := c.Flags.Int("np", 2, "number of ranks")
	timeout := c.Flags.Duration("timeout", 0, "the `deadline`")
	c.Flags.String("secret-file", "", "read the secret from `file`")
	c.Flags.String("d", "float32", "element type")
	c.Flags.Bool("json", false, "print JSON")
	c.Flags.Float64("scale", 1, "a factor")
	c.Flags.Uint64("seed", 0, "a seed")
	return c, np, timeout
}

func TestHelpListsEveryFlagInTheReadmesSpelling(t *testing.T) {
	c, _, _ := testCommand()
	var out, errb bytes.Buffer
	code, ok := c.Parse([]string{"--help"}, &out, &errb)
	if code != 0 || ok || errb.Len() != 0 {
		t.Fatalf("--help: code %d ok %v stderr %q", code, ok, errb.String())
	}
	want := `Usage: ringtail thing [flags]

Does a thing.

Flags:
  -d string
    	element type (default "float32")
  --json
    	print JSON
  -np int
    	number of ranks (default 2)
  --scale float
    	a factor (default 1)
  --secret-file file
    	read the secret from file
  --seed uint
    	a seed
  --timeout deadline
    	the deadline
`
	if out.String() != want {
		t.Fatalf("help:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestBadFlagsAreOneLineNamingTheFix(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--timeout", "5"}, "ringtail thing: --timeout 5: a duration needs a unit: use 5s (or ms, m, h) (run 'ringtail thing --help')\n"},
		{[]string{"-timeout=1.5"}, "--timeout 1.5: a duration needs a unit: use 1.5s"},
		{[]string{"--timeout", "soon"}, `--timeout "soon" is not a duration: use e.g. 500ms, 30s, 2m, 1h30m`},
		{[]string{"-np", "two"}, `-np "two" is not a whole number`},
		{[]string{"--seed", "-1"}, `--seed "-1" is not a whole number ≥ 0`},
		{[]string{"--scale", "x"}, `--scale "x" is not a number`},
		{[]string{"--json=maybe"}, "--json=maybe: want --json=true or --json=false"},
		{[]string{"--timeout"}, "--timeout needs a value"},
		{[]string{"--bogus"}, "ringtail thing: unknown flag --bogus (run 'ringtail thing --help')\n"},
		{[]string{"--jsno"}, "unknown flag --jsno; did you mean --json?"},
		{[]string{"--secret"}, "unknown flag --secret; did you mean --secret-file?"},
		{[]string{"-x"}, "unknown flag -x (run"},
		{[]string{"extra"}, `ringtail thing: unexpected argument "extra"`},
	} {
		c, _, _ := testCommand()
		var out, errb bytes.Buffer
		code, ok := c.Parse(tc.args, &out, &errb)
		if code != ExitUsage || ok || out.Len() != 0 || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q: code %d ok %v stdout %q stderr %q; want one line with %q", tc.args, code, ok, out.String(), errb.String(), tc.want)
		}
	}
}

func TestParseTakesBothDashStyles(t *testing.T) {
	c, np, timeout := testCommand()
	var out, errb bytes.Buffer
	if _, ok := c.ParseArgs([]string{"--np", "4", "-timeout", "2s", "--", "cmd", "-x"}, &out, &errb); !ok {
		t.Fatalf("refused: %s", errb.String())
	}
	if *np != 4 || *timeout != 2*time.Second || strings.Join(c.Flags.Args(), " ") != "cmd -x" {
		t.Fatalf("np %d timeout %v args %q", *np, *timeout, c.Flags.Args())
	}
	if g := c.Given(); !g["np"] || !g["timeout"] || g["json"] {
		t.Fatalf("given %v", g)
	}
}

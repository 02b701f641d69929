package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ExitUsage is the exit status of a usage error.
const ExitUsage = 2

// Command is one (sub)command's flags and help.
type Command struct {
	// Name prefixes every error line ("ringtail bench allreduce").
	Name string
	// Usage is printed by Help before the flags: the "Usage: ..." lines
	// and the description, ending with a newline.
	Usage string
	// Flags are the command's flags; register them before Parse.
	Flags *flag.FlagSet
}

// New returns a command with an empty flag set that prints nothing by
// itself (Parse does the printing).
func New(name, usage string) *Command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &Command{Name: name, Usage: usage, Flags: fs}
}

// FlagName is how the help and the errors spell a flag: "-np", "-H",
// "-b", but "--secret-file", "--json".
func FlagName(name string) string {
	if len(name) == 1 || name == "np" {
		return "-" + name
	}
	return "--" + name
}

// Parse parses args and refuses positional arguments. With -h or --help it
// prints Help on stdout and returns (0, false); on a bad flag it prints one
// line on stderr and returns (ExitUsage, false). The caller returns code
// when ok is false.
func (c *Command) Parse(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if code, ok = c.ParseArgs(args, stdout, stderr); ok && c.Flags.NArg() > 0 {
		return c.Fail(stderr, "unexpected argument %q", c.Flags.Arg(0)), false
	}
	return code, ok
}

// ParseArgs is Parse for commands that take positional arguments after
// the flags (c.Flags.Args()).
func (c *Command) ParseArgs(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := c.Flags.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		c.Help(stdout)
		return 0, false
	}
	return c.Fail(stderr, "%s", c.Explain(err)), false
}

// Fail prints "NAME: message (run 'NAME --help')" on stderr and returns
// ExitUsage.
func (c *Command) Fail(stderr io.Writer, format string, a ...any) int {
	fmt.Fprintf(stderr, "%s: %s (run '%s --help')\n", c.Name, fmt.Sprintf(format, a...), c.Name)
	return ExitUsage
}

// Given returns the flags given on the command line, by name.
func (c *Command) Given() map[string]bool {
	set := map[string]bool{}
	c.Flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// Help writes the usage text and every flag.
func (c *Command) Help(w io.Writer) {
	fmt.Fprint(w, c.Usage)
	n := 0
	c.Flags.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprint(w, "\nFlags:\n")
	WriteFlags(w, c.Flags)
}

// WriteFlags writes every flag of fs in name order: its spelling, the
// name of its value, and its usage with the default when that is not the
// zero value.
func WriteFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		b.WriteString("  " + FlagName(f.Name))
		name, usage := flag.UnquoteUsage(f)
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if !isZeroDefault(f) {
			if isString(f) {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w, b.String())
	})
}

// isString says the flag is a plain string flag (its default is quoted).
func isString(f *flag.Flag) bool { return fmt.Sprintf("%T", f.Value) == "*flag.stringValue" }

// isZeroDefault says the flag's default is its type's zero value, as
// flag.PrintDefaults decides it.
func isZeroDefault(f *flag.Flag) (zero bool) {
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	defer func() {
		if recover() != nil {
			zero = f.DefValue == ""
		}
	}()
	v, ok := z.Interface().(flag.Value)
	return ok && f.DefValue == v.String()
}

var (
	unknownRE = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	needsRE   = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
	invalidRE = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-+([^:]+): (.*)$`)
)

// Explain turns an error of c.Flags.Parse into the message after
// "NAME: ": the flag spelled as FlagName does, and for a bad value what
// the value should look like.
func (c *Command) Explain(err error) string {
	msg := err.Error()
	if m := unknownRE.FindStringSubmatch(msg); m != nil {
		out := "unknown flag " + FlagName(m[1])
		if near := c.nearest(m[1]); near != "" {
			out += "; did you mean " + FlagName(near) + "?"
		}
		return out
	}
	if m := needsRE.FindStringSubmatch(msg); m != nil {
		return FlagName(m[1]) + " needs a value"
	}
	if m := invalidRE.FindStringSubmatch(msg); m != nil {
		value, qerr := strconv.Unquote(m[1])
		if qerr != nil {
			value = m[1]
		}
		return c.badValue(m[2], value, m[3])
	}
	return msg
}

// badValue explains why value does not fit flag name (reason is the
// flag package's or the Value's own).
func (c *Command) badValue(name, value, reason string) string {
	flagName := FlagName(name)
	f := c.Flags.Lookup(name)
	if f == nil {
		return fmt.Sprintf("%s %q: %s", flagName, value, reason)
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			if _, err := strconv.ParseFloat(value, 64); err == nil {
				return fmt.Sprintf("%s %s: a duration needs a unit: use %ss (or ms, m, h)", flagName, value, value)
			}
			return fmt.Sprintf("%s %q is not a duration: use e.g. 500ms, 30s, 2m, 1h30m", flagName, value)
		case int, int64:
			return fmt.Sprintf("%s %q is not a whole number", flagName, value)
		case uint, uint64:
			return fmt.Sprintf("%s %q is not a whole number ≥ 0", flagName, value)
		case float64:
			return fmt.Sprintf("%s %q is not a number", flagName, value)
		case bool:
			return fmt.Sprintf("%s=%s: want %s=true or %s=false", flagName, value, flagName, flagName)
		}
	}
	return fmt.Sprintf("%s %q: %s", flagName, value, reason)
}

// nearest returns the defined flag closest to name (one edit away, two
// for names of five letters or more, or name a prefix of it), or "" (also
// for names shorter than three letters: anything is near those).
func (c *Command) nearest(name string) string {
	if len(name) < 3 {
		return ""
	}
	best, bestD := "", 2
	if len(name) >= 5 {
		bestD = 3
	}
	c.Flags.VisitAll(func(f *flag.Flag) {
		d := editDistance(name, f.Name)
		if strings.HasPrefix(f.Name, name) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

// editDistance is the edit distance of a and b counting insertions,
// deletions, substitutions and swaps of neighbours (optimal string
// alignment).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

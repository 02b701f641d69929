package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Environment variables read by FromEnv and FromLookup.
const (
	EnvLevel  = "RINGTAIL_LOG_LEVEL"  // trace, debug, info, warn (default), error, off
	EnvFormat = "RINGTAIL_LOG_FORMAT" // json or console (default: console on a terminal, else json)
)

// DefaultLevel is the level when RINGTAIL_LOG_LEVEL is unset.
const DefaultLevel = zerolog.WarnLevel

// Format is how log events are written.
type Format string

// The formats.
const (
	FormatAuto    Format = ""        // console on a terminal, JSON otherwise
	FormatJSON    Format = "json"    // one JSON object per line
	FormatConsole Format = "console" // human-readable, one line per event
)

// Options configure New.
type Options struct {
	// Level is the least severe level written.
	Level zerolog.Level
	// Format selects JSON or console output; FormatAuto picks console when
	// Terminal is set.
	Format Format
	// Out receives the events (nil: os.Stderr). It is wrapped so that
	// concurrent events never interleave.
	Out io.Writer
	// Terminal says Out is a terminal (IsTerminal of the file behind it):
	// FormatAuto then writes for humans, with colour.
	Terminal bool
}

// ParseLevel parses a RINGTAIL_LOG_LEVEL value: trace, debug, info, warn
// (or warning), error, or off (nothing is written). Case and surrounding
// space are ignored; "" is DefaultLevel.
func ParseLevel(s string) (zerolog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return DefaultLevel, nil
	case "trace":
		return zerolog.TraceLevel, nil
	case "debug":
		return zerolog.DebugLevel, nil
	case "info":
		return zerolog.InfoLevel, nil
	case "warn", "warning":
		return zerolog.WarnLevel, nil
	case "error":
		return zerolog.ErrorLevel, nil
	case "off", "none", "disabled":
		return zerolog.Disabled, nil
	}
	return zerolog.NoLevel, fmt.Errorf("logging: %s=%q: want trace, debug, info, warn, error or off", EnvLevel, s)
}

// ParseFormat parses a RINGTAIL_LOG_FORMAT value ("" is FormatAuto).
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case FormatAuto, FormatJSON, FormatConsole:
		return f, nil
	}
	return FormatAuto, fmt.Errorf("logging: %s=%q: want json or console", EnvFormat, s)
}

// New returns a logger writing to o.Out at o.Level with timestamps.
func New(o Options) zerolog.Logger {
	out := o.Out
	if out == nil {
		out = os.Stderr
	}
	format := o.Format
	if format == FormatAuto {
		format = FormatJSON
		if o.Terminal {
			format = FormatConsole
		}
	}
	w := zerolog.SyncWriter(out)
	if format == FormatConsole {
		w = zerolog.ConsoleWriter{Out: w, NoColor: !o.Terminal, TimeFormat: "15:04:05.000"}
	}
	return zerolog.New(w).Level(o.Level).With().Timestamp().Logger()
}

// OptionsFromLookup reads RINGTAIL_LOG_LEVEL and RINGTAIL_LOG_FORMAT
// through lookup (Out and Terminal are left for the caller). A malformed
// variable is reported and its default used, so a caller can still log
// the error.
func OptionsFromLookup(lookup func(string) (string, bool)) (Options, error) {
	var errs []error
	lv, _ := lookup(EnvLevel)
	level, err := ParseLevel(lv)
	if err != nil {
		errs = append(errs, err)
		level = DefaultLevel
	}
	fv, _ := lookup(EnvFormat)
	format, err := ParseFormat(fv)
	if err != nil {
		errs = append(errs, err)
	}
	return Options{Level: level, Format: format}, errors.Join(errs...)
}

// FromEnv is FromLookup(os.LookupEnv, out).
func FromEnv(out io.Writer) (zerolog.Logger, error) { return FromLookup(os.LookupEnv, out) }

// FromLookup builds the logger RINGTAIL_LOG_LEVEL and RINGTAIL_LOG_FORMAT
// (read through lookup) ask for, writing to out (nil: os.Stderr), for
// humans when out is a terminal. On a malformed variable it returns the
// error and a logger using the default for it.
func FromLookup(lookup func(string) (string, bool), out io.Writer) (zerolog.Logger, error) {
	o, err := OptionsFromLookup(lookup)
	if out == nil {
		out = os.Stderr
	}
	o.Out, o.Terminal = out, IsTerminal(out)
	return New(o), err
}

// ForProcess is the logger of a command writing to out: the environment's
// settings, with level (a --log-level flag's value), when not "",
// overriding RINGTAIL_LOG_LEVEL.
func ForProcess(out io.Writer, level string) (zerolog.Logger, error) {
	o, err := OptionsFromLookup(os.LookupEnv)
	if level != "" {
		l, lerr := ParseLevel(level)
		if lerr != nil {
			return zerolog.Nop(), lerr
		}
		o.Level = l
	}
	if out == nil {
		out = os.Stderr
	}
	o.Out, o.Terminal = out, IsTerminal(out)
	return New(o), err
}

// ForJob builds a launcher's logger on out (the stream the ranks' stderr
// lines are copied to as well; terminal says it is one) and returns the
// variable to give the ranks so that the stream has one format: console
// lines (coloured on a terminal) unless RINGTAIL_LOG_FORMAT asks for
// json, in which case the ranks inherit it. verbose lowers the level to
// debug.
func ForJob(lookup func(string) (string, bool), out io.Writer, terminal, verbose bool) (zerolog.Logger, string, error) {
	o, err := OptionsFromLookup(lookup)
	if err != nil {
		return zerolog.Nop(), "", err
	}
	if verbose && o.Level > zerolog.DebugLevel {
		o.Level = zerolog.DebugLevel
	}
	if o.Format == FormatAuto {
		o.Format = FormatConsole
	}
	o.Out, o.Terminal = out, terminal
	return New(o), EnvFormat + "=" + string(o.Format), nil
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Limited writes one kind of repeated event (a refused connection) at
// most Burst times per Period; the events it drops are counted and the
// count is reported with the next event it writes ("suppressed": n) and
// by Flush. The zero value is not usable; use NewLimited. It is safe for
// concurrent use.
type Limited struct {
	log    zerolog.Logger
	level  zerolog.Level
	burst  int
	period time.Duration
	now    func() time.Time

	mu         sync.Mutex
	windowEnds time.Time
	written    int    // events written in the current window
	suppressed uint64 // events dropped since the last one written
	total      uint64 // every event
}

// LimitedOptions configure NewLimited.
type LimitedOptions struct {
	Level  zerolog.Level    // the events' level (zero value: debug; callers pass warn)
	Burst  int              // events written per period (0: 5)
	Period time.Duration    // (0: 10 s)
	Now    func() time.Time // the clock (nil: time.Now); tests inject one
}

// NewLimited returns a Limited writing to log.
func NewLimited(log zerolog.Logger, o LimitedOptions) *Limited {
	if o.Burst <= 0 {
		o.Burst = 5
	}
	if o.Period <= 0 {
		o.Period = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Limited{log: log, level: o.Level, burst: o.Burst, period: o.Period, now: o.Now}
}

// Event returns the event to fill and Send for one occurrence, or nil
// (zerolog's disabled event: its methods do nothing) when this occurrence
// is suppressed. Every call counts.
func (l *Limited) Event() *zerolog.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	now := l.now()
	if !now.Before(l.windowEnds) {
		l.windowEnds, l.written = now.Add(l.period), 0
	}
	if l.written >= l.burst {
		l.suppressed++
		return nil
	}
	l.written++
	e := l.log.WithLevel(l.level)
	if l.suppressed > 0 {
		e = e.Uint64("suppressed", l.suppressed)
		l.suppressed = 0
	}
	return e
}

// Total returns how many events were reported, written or not.
func (l *Limited) Total() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// Flush writes msg with the count of events suppressed since the last one
// written, if any (call it when the flood is over, e.g. on shutdown).
func (l *Limited) Flush(msg string) {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if n > 0 {
		l.log.WithLevel(l.level).Uint64("suppressed", n).Msg(msg)
	}
}

package envcfg

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/internal/settings"
)

// Reader reads variables and remembers each one it could not parse.
type Reader struct {
	// Lookup finds a variable; nil is os.LookupEnv.
	Lookup func(name string) (string, bool)
	errs   []error
}

func (r *Reader) lookup(name string) (string, bool) {
	if r.Lookup != nil {
		return r.Lookup(name)
	}
	return os.LookupEnv(name)
}

// Get returns the value of name, or "" when it is unset.
func (r *Reader) Get(name string) string {
	v, _ := r.lookup(name)
	return v
}

// LookupVar returns the value of name and whether it is set.
func (r *Reader) LookupVar(name string) (string, bool) { return r.lookup(name) }

// String sets *dst from name when the variable is set and not empty.
func (r *Reader) String(name string, dst *string) {
	if v := r.Get(name); v != "" {
		*dst = v
	}
}

// Int sets *dst from name when the variable is set.
func (r *Reader) Int(name string, dst *int) {
	if v, ok := r.lookup(name); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s=%q is not an integer", name, v))
			return
		}
		*dst = n
	}
}

// Duration sets *dst from name (e.g. "30s", "5m") when the variable is set.
func (r *Reader) Duration(name string, dst *time.Duration) {
	if v, ok := r.lookup(name); ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s=%q is not a duration (e.g. 30s, 5m)", name, v))
			return
		}
		*dst = d
	}
}

// Bool sets *dst from name when the variable is set and not empty:
// settings.ParseBool's values (1/0, true/false, yes/no, on/off), any
// other value recorded as a problem naming the variable and them.
func (r *Reader) Bool(name string, dst *bool) {
	b, err := settings.ParseBool(name, r.Get(name), *dst)
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	*dst = b
}

// Fail records a problem found by the caller.
func (r *Reader) Fail(err error) { r.errs = append(r.errs, err) }

// Err joins every problem, or returns nil.
func (r *Reader) Err() error { return errors.Join(r.errs...) }

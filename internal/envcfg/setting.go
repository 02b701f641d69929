package envcfg

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/ringtail-ml/ringtail/internal/algo"
)

// Decl is what a setting declares whatever the type of its value.
type Decl struct {
	// Field is the setting's field in Comm and ringtail.Config (both
	// generated from the table, in its order).
	Field string
	// Env is the variable that sets it; "" for a field no variable sets
	// (Generation, Logger).
	Env string
	// Also is a second variable that sets the field (read by FromLookup's
	// placement, not by the table), e.g. RINGTAIL_SECRET_FILE.
	Also string
	// Doc is one line for the reference table in docs/settings.md.
	Doc string
	// GoDoc is the comment above the field in ringtail.Config ("" none:
	// the field shares the comment of the one above it).
	GoDoc string
	// Process marks a setting that acts on every communicator of the
	// process (WithProcessDebug): the variable fills the field when a
	// Config leaves it at its zero value.
	Process bool
}

// Of is the declaration of a setting whose value has type T.
type Of[T any] struct {
	Decl
	// Default is the value of DefaultConfig and of an unset variable.
	Default T
	// Read sets *dst from the variable name, recording a malformed value
	// on the Reader: (*Reader).Int, .Duration, .Bool, .String or a
	// function of the setting's own. Nil: the table does not read it
	// (the placement of the rank, read by FromLookup as torchrun, Slurm
	// or a Kubernetes Indexed Job set it).
	Read func(r *Reader, name string, dst *T)
	// Check reports why v, the field's value in c, is invalid (nil:
	// valid), naming the variable (Env) where the message says how to
	// set it; nil: any value is.
	Check func(c *Comm, name string, v T) error
	// Tune, when set, feeds the value to the program builders' settings
	// (Comm.Tunables).
	Tune func(t *algo.Tunables, v T)
}

// Setting is one entry of the table (an Of[T] for some T).
type Setting interface {
	// Declared returns the declaration's untyped part.
	Declared() Decl
	// DefaultString renders the default for the reference.
	DefaultString() string
	// Type is the field's Go type.
	Type() reflect.Type
	setDefault(c *Comm)
	read(r *Reader, c *Comm)
	check(c *Comm) error
	tune(c *Comm, t *algo.Tunables)
	fromProcess(c, env *Comm)
}

// Declared returns the declaration's untyped part.
func (s Of[T]) Declared() Decl { return s.Decl }

// Type is the field's Go type.
func (s Of[T]) Type() reflect.Type { return reflect.TypeFor[T]() }

// DefaultString renders the default for the reference: "" when it is the
// zero value, else as fmt's %v prints it.
func (s Of[T]) DefaultString() string {
	if reflect.ValueOf(&s.Default).Elem().IsZero() {
		return ""
	}
	return fmt.Sprint(s.Default)
}

// field returns a pointer to the setting's field of c.
func (s Of[T]) field(c *Comm) *T {
	f := reflect.ValueOf(c).Elem().FieldByName(s.Field)
	if !f.IsValid() {
		panic(fmt.Sprintf("envcfg: the table's %s is not a field of Comm (run go generate ./internal/envcfg)", s.Field))
	}
	return f.Addr().Interface().(*T)
}

func (s Of[T]) setDefault(c *Comm) { *s.field(c) = s.Default }

func (s Of[T]) read(r *Reader, c *Comm) {
	if s.Read != nil && s.Env != "" {
		s.Read(r, s.Env, s.field(c))
	}
}

func (s Of[T]) check(c *Comm) error {
	if s.Check == nil {
		return nil
	}
	return s.Check(c, s.Env, *s.field(c))
}

func (s Of[T]) tune(c *Comm, t *algo.Tunables) {
	if s.Tune != nil {
		s.Tune(t, *s.field(c))
	}
}

// fromProcess gives c the value env holds when c's is the zero value.
func (s Of[T]) fromProcess(c, env *Comm) {
	if f := s.field(c); reflect.ValueOf(f).Elem().IsZero() {
		*f = *s.field(env)
	}
}

// errorf is fmt.Errorf for a Check.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// joined is errors.Join for a Check that finds two problems.
func joined(errs ...error) error { return errors.Join(errs...) }

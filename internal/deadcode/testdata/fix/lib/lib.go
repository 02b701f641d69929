// Package lib has one function of each kind.
package lib

// Used is called by the command.
func Used() {}

// OwnTestOnly is called only by this package's tests: dead.
func OwnTestOnly() { reachedByDead() }

func reachedByDead() {}

// OtherTestOnly is called by another package's tests: a test helper.
func OtherTestOnly() {}

// Iface is called through an interface.
type Iface interface{ Do() }

// Impl implements Iface.
type Impl struct{}

// Do is called through Iface by the command.
func (Impl) Do() {}

// Unused is an exported method nobody calls, of a type that becomes an
// interface value: reflection could call it, so it counts as reachable.
func (Impl) Unused() {}

// Package fix is the root package of a module for the dead-code check's own
// test: its exported API is called by users.
package fix

// API is called by users.
func API() int { return helper() }

func helper() int { return 1 }

func unexported() {}

// T is a type of the API.
type T struct{}

// M is a method of the API.
func (T) M() {}

func (T) m() {}

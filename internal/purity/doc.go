// Package purity checks, from a package's own tests, that its decision
// code is pure as STYLE.md requires: only allowed imports, no goroutines,
// no clock reads, no global random source. It only reads source files.
// Its own tests check one rule over the whole module: only the commands
// and bench/ import the benchmark harnesses (bench/..., internal/bench).
package purity

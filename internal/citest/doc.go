// Package citest decides what a test does when a tool it needs is
// missing from the machine: skip with the reason, or, under CI (CI=true,
// which .ci/run sets), fail. .ci/run installs every tool the tests use, so
// there a missing one is a broken install step that must not pass unseen
// as a skip. It is for _test.go files.
package citest

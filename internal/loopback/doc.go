// Package loopback finds ports on 127.0.0.1 for jobs whose processes all
// run on this host: the recovery benchmark (bench/recovery) and the tests
// that start elastic ranks, each rank's memberlist on a port of its own.
package loopback

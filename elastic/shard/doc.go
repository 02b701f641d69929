// Package shard is ringtail's stateful dynamic data sharding (AntDT §V-C):
// an epoch of N samples is cut into K = ⌈N/(B·M)⌉ shards (offset, length);
// workers pull shards, report them DONE once their gradients are applied,
// or report failure; shards of dead workers go back to the end of the
// queue. This gives at-least-once processing of every sample per epoch
// while fast workers naturally take more shards than slow ones.
//
// This package owns the pure part: Config, Shard and its seeded sample
// permutation, and Queue, the TODO/DOING/DONE state machine driven by
// Commands. Queue starts no goroutines, reads no clock, does no I/O and
// uses no global random source; iteration is in index order, so the same
// sequence of Commands always yields the same state (which is what lets
// package wal rebuild it by replaying a log).
//
// Persistence lives in elastic/shard/wal and the network service in
// elastic/shard/service. This package must never import net, os, time,
// logging, or either of those subpackages.
package shard

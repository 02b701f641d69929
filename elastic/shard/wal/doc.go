// Package wal makes a shard.Queue durable: Store applies shard.Commands to
// the queue and appends every command that changed it to a write-ahead log
// (fsync'd before Apply returns), and periodically writes a snapshot of the
// queue and truncates the log. Reopening a directory restores the snapshot
// and replays the log, so a coordinator killed with SIGKILL loses no
// acknowledged command. A torn or corrupt tail (checked by CRC-32C) is
// detected, logged, and cut off after the last complete record.
//
// It owns the on-disk format (frame.go), the log (Store) and the snapshot
// files. It must never import net, the network service
// (elastic/shard/service) or the transport; the queue's logic stays in
// package shard.
package wal

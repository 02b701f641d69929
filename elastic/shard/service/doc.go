// Package service exposes a durable shard queue (elastic/shard/wal.Store)
// to workers over TCP: Server.Serve accepts connections, authenticates
// them with an HMAC-SHA256 challenge–response over the job secret, and
// answers Pull / Done / Fail / Stats requests; Client is the worker side.
//
// It owns the control-plane protocol (protocol.go: length-prefixed JSON
// frames with a size limit, versioned handshake; before a client has
// authenticated, 512-byte frames, a deadline and an internal/admit gate that
// keeps strangers from counting against MaxConns), the server's event loop
// — the only goroutine that touches the store — and worker liveness: when
// all connections a worker used are gone, its DOING shards go back to
// TODO, and after a restart, holders that do not come back within a grace
// period are released the same way.
//
// Scheduling decisions stay in package shard; durability in package wal.
// This package must never import the collective transport, NVML, or the
// balancing and straggler policies.
package service

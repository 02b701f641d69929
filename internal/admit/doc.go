// Package admit bounds what strangers can hold on a listener before they
// authenticate: a Gate admits each new connection as pending, closes it
// if it has not authenticated within a deadline, and keeps at most
// MaxPending pending connections in all and MaxPendingPerSource from one
// source IP. A new connection is always admitted: when a limit is reached
// the gate closes the oldest pending connection of that source (or, when
// the gate is full, the oldest of all), so a flood of idle or garbage
// connections costs fixed memory and cannot lock real clients out — it
// only shortens how long each stranger may idle. Every refusal (eviction,
// expired deadline, failed authentication reported by the server) is
// logged at warn through a rate limiter (logging.Limited).
//
// The choice of which connection to close is pure (pendingSet: no clock,
// no goroutines); the Gate adds the connections, timers and logging.
//
// Servers that authenticate strangers use it: the rendezvous (directly
// over TCP, and through internal/p2p's coordinator listener over libp2p)
// and the elastic shard service. This package imports nothing of
// ringtail's but internal/logging.
package admit

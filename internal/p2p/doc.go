// Package p2p runs ringtail's connections over go-libp2p: TCP, the Noise
// security handshake and yamux stream multiplexing, and nothing else — no
// relays, no NAT traversal or AutoNAT, no identify, no mDNS and no DHT.
//
// It owns three things:
//
//   - Identity. The coordinator's Ed25519 key is derived from the job
//     secret and job id (HKDF-SHA256), so every rank knows the coordinator's
//     peer ID in advance and Noise refuses an impostor coordinator before a
//     byte of the rendezvous protocol is spoken. Ranks use fresh random keys.
//   - The control plane. Listener lets internal/rendezvous's Server serve
//     streams of protocol RendezvousProtocol; DialRendezvous and Register
//     reach it from a rank.
//   - A data-plane Network, the libp2p twin of transport.Sockets: streams of
//     protocol DataProtocol presented as net.Conn. It passes the transport
//     conformance behaviours but is several times slower than raw sockets
//     for bulk bytes (see docs/libp2p.md), so it is for untrusted networks,
//     never the default.
//
// Noise authenticates peer keys only; ringtail's own HMAC handshakes over the
// job secret (transport.DialHandshake, the rendezvous challenge–response)
// still run on every stream and remain what admits a rank. Until one has,
// the coordinator's host holds the connection in an internal/admit gate
// (gate.go): fixed limits, a handshake deadline, the oldest stranger
// closed to make room.
//
// This package may import internal/transport, internal/rendezvous and
// internal/admit; it must
// not import the root package, the executor, the plan builders or any policy
// package, and nothing below internal/transport may import it.
package p2p

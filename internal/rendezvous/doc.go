// Package rendezvous lets the ranks of a job find each other: each rank
// registers its data-plane endpoint and plan-affecting settings with a
// coordinator at a known address (MASTER_ADDR:MASTER_PORT), and once every
// rank of the group has registered, each receives the full table.
//
// Every exchange is authenticated both ways with an HMAC-SHA256
// challenge–response over the job secret; a client that cannot prove the
// secret is refused and logged (rate-limited) with its address. Messages
// are length-prefixed JSON. Before a client has proved the secret the
// server reads at most MaxHandshakeMessage bytes from it, tells it nothing
// but a nonce, and holds it in an internal/admit gate (a handshake
// deadline, limits on such clients in all and per source); the member
// record, up to MaxMessage bytes, is read only after.
//
// This package must not import the root package or any policy package.
package rendezvous

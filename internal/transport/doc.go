// Package transport moves ringtail's data-plane frames between ranks: it
// opens authenticated connections (TCP between hosts, abstract unix sockets
// on one host, or an in-memory twin for tests), keeps one reader and one
// writer goroutine per connection, watches peers for silence with
// heartbeats, and turns every failure into an *Error naming the rank to blame.
// Frames on links that cross hosts (TCP) carry an AEAD tag with keys per
// link and direction from the handshake (seal.go, FrameAuth): a frame that
// fails its check is a KindIntegrity error naming the link, and nothing of
// it is applied.
//
// Nothing here knows about collectives: the executor (internal/exec) posts
// sends and receives on Links, and Links complete them in order. A failure
// anywhere aborts the whole Mesh: every link carries an Abort frame naming
// the culprit so every rank reports the same rank.
//
// This package must not import the root package, the plan builders (ring,
// tree, gradcode) or any policy package.
package transport

// Package wire is ringtail's data-plane wire format: the fixed 32-byte frame
// header, the authenticated handshake messages and their limits.
//
// Every multi-byte field is little-endian. Every length field is checked
// against a limit before any allocation, so a hostile or corrupted peer
// gets an error, never a large allocation or a panic (see the fuzz tests).
//
// Frame layout (32 bytes, then Len payload bytes):
//
//	0  Type    u8   Data, Heartbeat, Abort, Hello, Challenge, Response, Verdict
//	1  Flags   u8   reserved, zero
//	2  Kind    u8   collective kind of a Data frame (allreduce, ...)
//	3  DType   u8   element type of the collective
//	4  RedOp   u8   reduction operator (0 when none)
//	5  -       u8   reserved, zero
//	6  Channel u16  channel (parallel ring) the frame belongs to
//	8  Seq     u32  collective sequence number on this communicator
//	12 Root    u32  root rank (broadcast) or 0
//	16 Count   u64  element count of the collective as the sender called it
//	24 Len     u32  payload length in bytes
//	28 -       u32  reserved, zero
//
// Carrying the collective's full descriptor in every Data frame lets a
// receiver name exactly how a peer's call differs from its own.
//
// This package does no I/O beyond io.Reader/io.Writer and must never import
// net or any other ringtail package.
package wire

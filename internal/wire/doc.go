// Package wire is ringtail's data-plane wire format: the fixed 48-byte frame
// header with the call descriptor, the authenticated handshake messages,
// the stall query and their limits.
//
// Every multi-byte field is little-endian. Every length field is checked
// against a limit before any allocation, so a hostile or corrupted peer
// gets an error, never a large allocation or a panic (see the fuzz tests).
//
// Frame layout (48 bytes, then Len payload bytes):
//
//	0  Type       u8   Data, Heartbeat, Abort, Hello, Challenge, Response, Verdict, Query, State
//	1  Flags      u8   FlagS2 on an Eager Data frame whose payload is s2; else zero
//	2  Channel    u16  channel (parallel ring) of a Data frame
//	4  Len        u32  payload length in bytes
//	8  Seq        u32  message number on this link and direction (Data)
//	12 -          u32  reserved, zero
//	16 Collective u8   the call's kind (Desc; zero on non-Data frames)
//	17 DType      u8   element type
//	18 RedOp      u8   reduction operator (0 when none)
//	19 -          u8   reserved, zero
//	20 Root       u32  root rank of a rooted call
//	24 Group      u32  0 for every rank, else the hash of the members
//	28 Tag        u32  tag of an eager or point-to-point message
//	32 Call       u64  call number within the group, from 1
//	40 Count      u64  element count as the sender called it
//
// Carrying the call's full descriptor in every Data frame lets a receiver
// name exactly which field of a peer's call differs from its own (Desc.Diff),
// including a skipped or extra call (the call number), at no extra cost on
// the data path.
//
// An eager message (a child's gradient on a slow link) may travel
// compressed: each frame whose header has FlagS2 carries one s2 block that
// declares its decoded length, bounded by what remains of the message
// before anything is decoded (DecodeS2, MaxS2Len). Every other frame, and
// every frame of the collectives' hot path, is plain.
//
// This package does no I/O beyond io.Reader/io.Writer and must never import
// net or any other ringtail package.
package wire

// Package flight is ringtail's flight recorder: each rank keeps its last N
// collectives (the call number, what was called, the program chosen, the
// state, timestamps and the peer a long wait was waiting on) in a ring the
// engine writes on every call, and dumps them as JSON, one file per rank,
// when the communicator fails, on SIGUSR1, or live over HTTP. Analyze
// reads every rank's dump of a job and tells the story: which rank stopped
// calling, or the first call where ranks disagree.
//
// Cost. The recorder is always on, so the per-call path is a handful of
// plain stores into a preallocated slot: no lock, no atomic, no
// allocation. The clock is read on every call only while calls are rarer
// than one per clockSpacing; in a burst of fast calls it is read once per
// 2, 4, ... up to 1024 calls (the calls in between carry the last reading
// and are marked approximate), so a clock read never costs more than a
// fraction of a percent of the calls it stamps. A call that waits long
// (a millisecond and more) is stamped exactly and published to readers.
//
// Readers and the writer. Every slot is written by the goroutine running
// the call, under the engine's call lock. A reader (a dump) takes that
// lock with TryLock when no call runs; while a call runs that has waited
// long, the call has published itself under the recorder's own mutex, and
// from then on writes its slot only under that mutex, so the reader takes
// the mutex instead. A call that neither ended nor waited long is a few
// microseconds from either: the reader retries until its bound.
package flight

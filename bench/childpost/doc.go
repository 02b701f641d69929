// Command childpost measures an evicted child's gradient post to its
// parent, plain against s2-compressed (ringtail.PostOptions.Compress), and
// shows what the straggler driver's decision (straggler.Compression) makes
// of it on the link it runs over.
//
// The child is the last rank, its parent rank 0 (other ranks only meet at
// the barriers). First every rank probes the links (Comm.Probe): the
// child→parent bandwidth the decision weighs. A trial: a barrier, then the
// child posts its gradient with ContributeAsyncWith; the parent takes it
// (TakeContribution), checks every byte and answers with an 8-byte
// acknowledgement; the trial's time is the child's post → acknowledgement
// (one small message's latency more than the gradient's arrival). Plain
// and compressed trials alternate (plain first in even trials). For each
// size, a sparse gradient (-zeros of its float32s zero, at scattered
// positions; the others random normal) and a dense one (no zeros). The
// decision is fed the compressed trials' measurements and asked once.
//
//	go run ./bench/childpost -np 2 -size 4M,16M                        # in-process ranks
//	ringtail run -H h0:1,h1:1 -- childpost -size 4M,16M                  # one rank per host
package main

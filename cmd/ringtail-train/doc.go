// Command ringtail-train is ringtail's main job: synchronous data-parallel
// SGD of a small MLP on the UCI optical digits (shipped in data/ and
// embedded in the binary), gradients averaged with AllReduce. It reads its
// rank and rendezvous from the environment that `ringtail run` or torchrun
// sets, and runs as a single rank with no environment at all:
//
//	ringtail run -np 4 -- ringtail-train --inject slow=2:3x
//
// Each step's compute is padded to --step-compute (default 100ms) with a
// timer sleep, standing for GPU work; --inject (default $RINGTAIL_INJECT)
// scales it per rank and step and performs kill/freeze faults.
// --mode adaptive (the default; --mode bsp is plain synchronous SGD)
// reduces gradients through the straggler driver (straggler/driver) under
// --policy: "shares" (the default) gives each rank a batch share
// proportional to its measured speed and evicts ranks still late, "star"
// evicts stragglers into parent trees where they compute at their own
// pace, "exact" overlaps a late rank's arrival with the others'
// reduce-scatter (see docs/straggler.md). --mode coded trains under
// gradient coding (gradcode): each rank holds only the data partitions
// the plan on the ranks' predicted throughputs gives it, every partition
// on --coded-s + 1 ranks, and each step is decoded from the first n − s
// ranks' coded payloads (docs/gradcode.md). Rank 0
// prints one line per epoch and a summary, or the report as JSON with
// --json. It only wires flags to examples/train; behaviour lives there.
package main

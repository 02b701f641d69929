// Command worker is the fault harness's rank program (see package
// integration/faults): started by `ringtail run`, it joins the job from
// the environment and runs a fixed sequence of collectives on
// deterministic data, checking every result against a reference computed
// locally, and reports what happened as JSON lines on stdout. It can be
// told to misbehave at one step (skip the collective, or call it with
// another root, dtype, count or reduction op). Kills and freezes are the
// harness's doing, from outside.
//
// Two more roles serve the connection-flood checks of the elastic shard
// service: -role shard-service hosts one (printing its address), -role
// shard-client pulls every shard of it to the end.
package main

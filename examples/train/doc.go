// Package train is ringtail's main job: a real data-parallel training of a
// small classifier, built only on the public ringtail API, that stands for
// the GPU jobs the runtime is for.
//
// It owns:
//   - the data set loader (dataset.go): the UCI optical digits shipped in
//     the module's data/ directory (BSD, 1797 rows of 8×8 pixels), read
//     from gzip CSV, scaled to [0, 1], split 80/20 by a seeded shuffle;
//   - the model (model.go): a float32 MLP (softmax regression when it has
//     no hidden layer) with forward and backward written by hand and
//     checked against finite differences;
//   - SGD with momentum (optimizer.go) and the sharding of each global
//     batch across ranks (shard.go);
//   - the Trainer (trainer.go): synchronous SGD. Rank 0's initial weights
//     are broadcast; each step every rank computes the summed gradient of
//     its disjoint slice of the same global batch, pads that compute to
//     --step-compute with a timer sleep scaled by the straggler injector
//     (straggler/inject), AllReduce(Sum)s gradient and loss in one buffer
//     and divides by the global batch size, which stays exact when the
//     last batch splits unequally. After each epoch every rank evaluates
//     the held-out set; at the end the ranks check with one AllReduce that
//     their parameters are bit-identical;
//   - the coded job (coded.go, Config.Coded): gradient coding through
//     gradcode/coded — the training set cut into the plan's partitions,
//     each rank holding its own (every partition on s+1 ranks), each step
//     synchronous SGD's batch decoded from the first n−s ranks' payloads;
//   - the per-epoch Report (report.go).
//
// cmd/ringtail-train wires flags and the environment to this package.
//
// Padding matters: the model computes a step in about a millisecond while
// a 4-rank AllReduce on a 2-core host takes several, so without padding an
// injected 3× slow rank would be invisible. The pad is a timer sleep so it
// takes no CPU from the collective.
//
// This package must never import ringtail's internal packages, the
// straggler policy, or anything that is not public API: it is what a user
// would write.
package train

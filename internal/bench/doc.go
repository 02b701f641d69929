// Package bench measures collectives the way nccl-tests does: for each
// size of a geometric sweep it checks correctness once, then times
// back-to-back iterations and reports time, algorithm bandwidth and bus
// bandwidth (decimal GB/s; busbw = algbw × 2(n−1)/n for allreduce,
// (n−1)/n for allgather and reduce-scatter, 1 for broadcast).
//
// It runs inside each rank of a job (see cmd/ringtail bench-worker) and
// uses only the public ringtail API.
package bench

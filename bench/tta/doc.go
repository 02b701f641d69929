// Package tta is the harness behind `ringtail bench straggler --tta`:
// time to synchronous SGD's accuracy on a real model. The main job's model
// (examples/train: the digits MLP) is trained by ranks in this process,
// one communicator over real sockets each, under the benchmark's straggler
// patterns (straggler/workload), with BSP and with each policy. Synchronous
// SGD without a straggler sets the target: its held-out accuracy after
// Config.TargetEpoch epochs, and the training time its curve first reaches
// it. Each run's time to that target, over the no-straggler time, is what
// a straggler system is judged by (STAR); a faster step that ends lower
// shows up here as a later time or a run that never gets there. Only cmd/
// and tests import it.
package tta

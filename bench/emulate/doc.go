// Package emulate is the harness of ringtail bench balance: the balancing
// schemes of package balance (AntDT's batch sizes and accumulation,
// CHRONICA's size-aware packing) played over an epoch in virtual time,
// returning per-step, per-rank compute plans (EpochPlan) that the CLI runs
// with real sleeps or sums virtually. It is pure, like balance.
package emulate

// Package topology owns ringtail's pure topology decisions: how ranks are
// arranged for communication, given who shares a host and what the links
// between them measure.
//
// It owns:
//
//   - Rank and Matrix, the plain-data inputs (a rank's host; pairwise
//     bandwidth or latency between ranks), and EstimateLinks, which turns raw
//     probe samples (bytes and duration per ordered pair) into median-based
//     latency and bandwidth estimates that shrug off outliers. Probing
//     itself is I/O and lives elsewhere;
//   - RingOrder: a ring that keeps same-host ranks adjacent and, for a few
//     hosts, orders hosts to maximise the ring's slowest inter-host link;
//   - AssignParents / ParentPolicy.Assign: STAR's eviction of stragglers
//     into parent trees (papers/003 §IV-B), each evicted rank attached to a
//     high-bandwidth ring member with parent balancing (§IV-D2), solved
//     exactly as a small min-cost flow.
//
// (Latency-optimal programs for small messages — binomial broadcast,
// recursive doubling — are built by package tree.)
//
// Everything here is a pure function of its arguments: no I/O, no clock
// reads, no goroutines, no global random source; maps are never iterated;
// the same input gives the same output whatever the order of its slices.
//
// This package must never import net, os (beyond what fmt pulls in), the
// transport, nvml, the straggler controller, or logging; from time it uses
// only time.Duration.
package topology

// Package synthetic is the harness behind `ringtail bench straggler`: a
// synthetic data-parallel job whose ranks sleep their injected compute
// (straggler/workload, straggler/inject), put their sample counts in their
// gradients and reduce them through the straggler driver, in this process
// over real sockets (Run) or as processes of a launcher or test bed
// (Config.Join, with LinkShaper for network patterns); RunBench compares
// BSP, policies and FlexRR's Ideal pattern by pattern, in seconds per global
// batch of applied samples, and checks that every sample computed was
// applied exactly once. Only cmd/ and tests import it.
package synthetic

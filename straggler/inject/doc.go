// Package inject is the one place where ringtail jobs, benchmarks and
// simulations inject stragglers and faults.
//
// A spec string (from a flag or the RINGTAIL_INJECT environment variable)
// is parsed into a [Spec]; clauses are separated by ';':
//
//	seed=N                        seed for every random pattern (default 0)
//	slow=R:Fx                     deterministic slow rank(s): compute × F (F ≥ 1); R may be "1,3"
//	persistent=R1,R2:+Dms         AntDT persistent straggler: constant extra delay D per step
//	persistent=R:Fx               AntDT persistent straggler: compute × F (F ≥ 1)
//	flexrr-slow=P:D%              FlexRR §5.1 slow-worker pattern, probability P, delay intensity D%
//	powerlaw=ALPHA                FlexRR §5.1 power-law pattern, p(t) ∝ t^−α, α > 2
//	transient=I[:opt=v...]        AntDT §VII transient stragglers, intensity 0 < I ≤ 1;
//	                              options sleep=1500ms|2x, period=30, on=15, frac=0.3
//	kill=R@S                      rank R exits with code 137 at step S
//	freeze=R@S[:D]                rank R stops itself (SIGSTOP) at step S for D (0: until SIGCONT)
//	link=R:opt[:opt...]           network straggler on R's link, options rate=50mbit, delay=20ms,
//	                              jitter=5ms, loss=1%, stall=500ms@step10 or stall=500ms@2s (see Link);
//	                              applied by a test bed (internal/testbed.ApplyLinks), not by the Injector
//
// An [Injector] evaluates a validated Spec for a world size. It is pure:
// [Injector.At] maps (rank, step, base compute duration) to an [Effect] — the
// compute duration to use for that step and an optional [Fault] — as a
// deterministic function of the seed. It reads no clock, starts no goroutine
// and keeps no mutable state, so it may be called for any (rank, step) in any
// order, from any goroutine, and gives the same answer every time. Every
// random draw comes from a PCG stream seeded with (seed, pattern, rank, step,
// index), which is what makes random access possible.
//
// runtime.go holds the thin OS edge, [Runner]: it sleeps a step's compute up
// to the injected duration (a timer sleep that uses no CPU), exits the process
// on Kill and stops it with SIGSTOP on Freeze. It is the only file of the
// package that touches the process, the clock or a logger.
//
// The decision packages (straggler, balance, elastic) must never import this
// package outside their tests: it is a test and job harness, not policy.
// This package must never import net, ringtail's transport or NVML bindings;
// the Injector must never read the clock or a global random source.
package inject

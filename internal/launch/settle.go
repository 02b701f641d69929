package launch

// ending reports whether the rank's process has ended or is ending:
// reaped already (its exit is on its way to the wait loop, after its
// output is drained), or begun to exit (see the function ending), so that
// its wait goroutine will reap it at once.
func (p *proc) ending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited || ending(p.cmd.Process.Pid)
}

// received marks the rank of e as heard from by the wait loop.
func (j *job) received(e rankExit) {
	for _, p := range j.procs {
		if p.place.Rank == e.place.Rank {
			p.received = true
		}
	}
}

// firstFailure returns the failure that decides the job, given e, the
// first failed exit the wait loop received.
//
// When a rank is killed, its peers learn of it within milliseconds (the
// kernel closes its sockets as it dies), fail their collective and exit
// with a plain status of their own. Each rank's exit then reaches the wait
// loop through its own goroutine, which returns from wait4 and waits for
// the rank's output pipes to drain before sending; on a loaded machine
// those hops run in no particular order, so a survivor's exit 1 often
// arrived before the killed rank's 137 (2 runs in 3 over TCP in the fault
// harness).
//
// So a plain status does not decide alone: every other rank whose process
// has ended or begun to exit at this point is collected first (the kernel
// marks every thread of a killed process exiting before it closes the
// process's sockets, so a rank whose death a peer saw is among them), and
// a death by signal among them decides instead. The ranks whose process
// still runs are not waited for, so the outcome depends only on what the
// kernel had done to the processes, never on a timer. Each exit collected counts against running;
// waiting for them is bounded by the grace of proc.wait's output drain.
// A srun step reports its ranks otherwise: e decides as it is.
func (j *job) firstFailure(e rankExit, exits <-chan rankExit, running *int) rankExit {
	if e.signal != 0 || e.err != nil || j.cfg.isSrun() {
		return e
	}
	pending := map[int]bool{}
	for _, p := range j.procs {
		if p.place.Rank >= 0 && !p.received && p.ending() {
			pending[p.place.Rank] = true
		}
	}
	for len(pending) > 0 {
		x := <-exits
		*running--
		j.received(x)
		delete(pending, x.place.Rank)
		j.cfg.Logger.Debug().Int("rank", x.place.Rank).Int("status", x.status).Int("signal", int(x.signal)).Err(x.err).Msg("launch: rank exited")
		if x.signal != 0 && e.signal == 0 {
			e = x
		}
	}
	return e
}

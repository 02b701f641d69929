package plan

import "fmt"

// SimOp is the reduction the reference simulator applies (float64).
type SimOp func(dst, src float64) float64

// Simulate runs every rank's program in memory, one rank at a time, as the
// reference the real executor is tested against. Messages on a (from, to,
// channel) triple are delivered in order; a step runs once all of its
// receives can be satisfied. Eager messages (Post) wait at their receiver
// until a Collect with a matching tag takes them; a Collect without Must
// runs once nothing else can progress (its deadline has passed), taking
// what has been posted to it by then. data[r] and input[r] are rank r's
// buffers (input may be nil); on return data holds the results. It fails
// on a deadlock, an unmatched ordered message or a length mismatch; eager
// messages nobody collected are returned (a late child's gradient waits
// for the next call).
func Simulate(progs []*Program, data, input [][]float64, op SimOp) error {
	_, err := SimulateEager(progs, data, input, op)
	return err
}

// EagerMessage is an eager message Simulate left uncollected.
type EagerMessage struct {
	From, To int
	Tag      uint32
	Data     []float64
}

// SimulateEager is Simulate, returning the eager messages left uncollected.
func SimulateEager(progs []*Program, data, input [][]float64, op SimOp) ([]EagerMessage, error) {
	n := len(progs)
	type key struct{ from, to, ch int }
	queues := map[key][][]float64{}
	var eager []EagerMessage // posted, not yet collected, in posting order
	lateCollect := false     // nothing else could progress: deadlines have passed
	scratch := make([][]float64, n)
	pos := make([][]int, n)      // [rank][channel] next step
	started := make([][]bool, n) // [rank][channel] local ops and sends done
	for r, p := range progs {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if p.Rank != r || p.World != n {
			return nil, fmt.Errorf("simulate: program %d is for rank %d of %d", r, p.Rank, p.World)
		}
		if len(data[r]) != p.DataLen {
			return nil, fmt.Errorf("simulate: rank %d data has %d elements, program wants %d", r, len(data[r]), p.DataLen)
		}
		scratch[r] = make([]float64, p.ScratchLen)
		pos[r] = make([]int, len(p.Channels))
		started[r] = make([]bool, len(p.Channels))
	}
	buf := func(r int, b Buf) []float64 {
		switch b {
		case Input:
			return input[r]
		case Scratch:
			return scratch[r]
		}
		return data[r]
	}
	for {
		progress, pending := false, false
		for r, p := range progs {
			for c, ch := range p.Channels {
				for pos[r][c] < len(ch.Steps) {
					st := ch.Steps[pos[r][c]]
					if !started[r][c] {
						started[r][c] = true
						progress = true
						for _, o := range st.Ops {
							dst := buf(r, o.Buf)
							switch o.Kind {
							case Copy:
								copy(dst[o.Off:o.Off+o.Len], buf(r, o.Src)[o.SrcOff:o.SrcOff+o.Len])
							case Reduce:
								src := buf(r, o.Src)[o.SrcOff:]
								for i := 0; i < o.Len; i++ {
									dst[o.Off+i] = op(dst[o.Off+i], src[i])
								}
							case Scale:
								for i := o.Off; i < o.Off+o.Len; i++ {
									dst[i] /= float64(o.Div)
								}
							}
						}
						for _, o := range st.Ops {
							msg := append([]float64(nil), buf(r, o.Buf)[o.Off:o.Off+o.Len]...)
							switch o.Kind {
							case Send:
								k := key{r, o.Peer, c}
								queues[k] = append(queues[k], msg)
							case Post:
								eager = append(eager, EagerMessage{From: r, To: o.Peer, Tag: o.Tag, Data: msg})
							}
						}
					}
					matches := func(o Op, m EagerMessage) bool {
						return m.From == o.Peer && m.To == r && m.Tag&o.TagMask == o.Tag&o.TagMask
					}
					ready := true
					for _, o := range st.Ops {
						switch o.Kind {
						case Recv, RecvReduce:
							if len(queues[key{o.Peer, r, c}]) == 0 {
								ready = false
							}
						case Collect:
							have := false
							for _, m := range eager {
								have = have || matches(o, m)
							}
							if !have && (o.Must || !lateCollect) {
								ready = false
							}
						}
					}
					if !ready {
						pending = true
						break
					}
					for _, o := range st.Ops {
						if o.Kind == Collect {
							kept := eager[:0]
							for _, m := range eager {
								if !matches(o, m) {
									kept = append(kept, m)
									continue
								}
								if len(m.Data) != o.Len {
									return nil, fmt.Errorf("simulate: rank %d collects %d elements from %d, got %d", r, o.Len, o.Peer, len(m.Data))
								}
								dst := buf(r, o.Buf)[o.Off : o.Off+o.Len]
								for i := range dst {
									dst[i] = op(dst[i], m.Data[i])
								}
							}
							eager = kept
							continue
						}
						if o.Kind != Recv && o.Kind != RecvReduce {
							continue
						}
						k := key{o.Peer, r, c}
						msg := queues[k][0]
						queues[k] = queues[k][1:]
						if len(msg) != o.Len {
							return nil, fmt.Errorf("simulate: rank %d ch %d step %d expects %d elements from %d, got %d", r, c, pos[r][c], o.Len, o.Peer, len(msg))
						}
						dst := buf(r, o.Buf)[o.Off : o.Off+o.Len]
						if o.Kind == Recv {
							copy(dst, msg)
						} else {
							for i := range dst {
								dst[i] = op(dst[i], msg[i])
								if o.Div > 0 {
									dst[i] /= float64(o.Div)
								}
							}
						}
					}
					pos[r][c]++
					started[r][c] = false
					progress = true
				}
			}
		}
		if !pending {
			break
		}
		if !progress {
			if !lateCollect {
				lateCollect = true // every deadline passes: collects take what they have
				continue
			}
			return nil, fmt.Errorf("simulate: deadlock")
		}
		lateCollect = false
	}
	for k, q := range queues {
		if len(q) > 0 {
			return nil, fmt.Errorf("simulate: %d unreceived messages from %d to %d on channel %d", len(q), k.from, k.to, k.ch)
		}
	}
	return eager, nil
}

// SimSum is the SimOp for Sum and Avg.
func SimSum(a, b float64) float64 { return a + b }

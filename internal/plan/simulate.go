package plan

import "fmt"

// SimOp is the reduction the reference simulator applies (float64).
type SimOp func(dst, src float64) float64

// Simulate runs every rank's program in memory, one rank at a time, as the
// reference the real executor is tested against. Messages on a (from, to,
// channel) triple are delivered in order; a step runs once all of its
// receives can be satisfied. data[r] and input[r] are rank r's buffers
// (input may be nil); on return data holds the results. It fails on a
// deadlock, an unmatched message or a length mismatch.
func Simulate(progs []*Program, data, input [][]float64, op SimOp) error {
	n := len(progs)
	type key struct{ from, to, ch int }
	queues := map[key][][]float64{}
	scratch := make([][]float64, n)
	pos := make([][]int, n)      // [rank][channel] next step
	started := make([][]bool, n) // [rank][channel] local ops and sends done
	for r, p := range progs {
		if err := p.Validate(); err != nil {
			return err
		}
		if p.Rank != r || p.World != n {
			return fmt.Errorf("simulate: program %d is for rank %d of %d", r, p.Rank, p.World)
		}
		if len(data[r]) != p.DataLen {
			return fmt.Errorf("simulate: rank %d data has %d elements, program wants %d", r, len(data[r]), p.DataLen)
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
							if o.Kind == Send {
								k := key{r, o.Peer, c}
								queues[k] = append(queues[k], append([]float64(nil), buf(r, o.Buf)[o.Off:o.Off+o.Len]...))
							}
						}
					}
					ready := true
					for _, o := range st.Ops {
						if o.Kind == Recv || o.Kind == RecvReduce {
							if len(queues[key{o.Peer, r, c}]) == 0 {
								ready = false
							}
						}
					}
					if !ready {
						pending = true
						break
					}
					for _, o := range st.Ops {
						if o.Kind != Recv && o.Kind != RecvReduce {
							continue
						}
						k := key{o.Peer, r, c}
						msg := queues[k][0]
						queues[k] = queues[k][1:]
						if len(msg) != o.Len {
							return fmt.Errorf("simulate: rank %d ch %d step %d expects %d elements from %d, got %d", r, c, pos[r][c], o.Len, o.Peer, len(msg))
						}
						dst := buf(r, o.Buf)[o.Off : o.Off+o.Len]
						if o.Kind == Recv {
							copy(dst, msg)
						} else {
							for i := range dst {
								dst[i] = op(dst[i], msg[i])
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
			return fmt.Errorf("simulate: deadlock")
		}
	}
	for k, q := range queues {
		if len(q) > 0 {
			return fmt.Errorf("simulate: %d unreceived messages from %d to %d on channel %d", len(q), k.from, k.to, k.ch)
		}
	}
	return nil
}

// SimSum is the SimOp for Sum and Avg.
func SimSum(a, b float64) float64 { return a + b }

package main

import (
	"context"
	"fmt"
	"math"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
)

type logger = zerolog.Logger

// rank runs the collectives of one rank.
type rank struct {
	o        options
	comm     *ringtail.Comm
	me, np   int
	buf, out []float32
}

// value is rank r's input element i at step s: small integers, so every
// sum over up to 4096 ranks is exact in float32 and the reference is
// bit-exact.
func value(r, s, i int) float32 { return float32((r*7 + s*13 + i) % 251) }

// opAt returns the collective of step s.
func (r *rank) opAt(s int) string {
	if r.o.op != "mixed" {
		return r.o.op
	}
	return [...]string{"allreduce", "broadcast", "allgather", "reducescatter"}[s%4]
}

// step runs collective s and checks its result; it returns a description
// of a wrong result, or the collective's error.
func (r *rank) step(ctx context.Context, s int) (wrong string, err error) {
	n := r.o.elems
	fault := ""
	if r.me == r.o.target && s == r.o.at {
		fault = r.o.fault
	}
	if fault == "skip" {
		return "", nil // this rank's result for s is not checked: it did not take part
	}
	// The step label catches a skipped call whose next call has the same
	// shape (both are the group's call k).
	ctx = ringtail.WithStep(ctx, uint64(s))
	if len(r.buf) < n*r.np {
		r.buf, r.out = make([]float32, n*r.np), make([]float32, n*r.np)
	}
	switch op := r.opAt(s); op {
	case "allreduce":
		buf := r.buf[:n]
		for i := range buf {
			buf[i] = value(r.me, s, i)
		}
		b, count, red := ringtail.Float32s(buf), n, ringtail.Sum
		switch fault {
		case "dtype":
			b = ringtail.Raw(b.Bytes, ringtail.Int32) // same bytes, another type
		case "count":
			count = n - 1
			b = ringtail.Float32s(buf[:count])
		case "op":
			red = ringtail.Max
		}
		if err := r.comm.AllReduce(ctx, b, red); err != nil {
			return "", err
		}
		return check(op, s, buf[:count], func(i int) float32 {
			var sum float32
			for q := range r.np {
				sum += value(q, s, i)
			}
			return sum
		}), nil
	case "broadcast":
		root := s % r.np
		if fault == "root" {
			root = (root + 1) % r.np
		}
		buf := r.buf[:n]
		for i := range buf {
			buf[i] = value(r.me, s, i)
		}
		if err := r.comm.Broadcast(ctx, ringtail.Float32s(buf), root); err != nil {
			return "", err
		}
		want := s % r.np
		return check(op, s, buf, func(i int) float32 { return value(want, s, i) }), nil
	case "allgather":
		c := max(n/r.np, 1)
		send, recv := r.buf[:c], r.out[:c*r.np]
		for i := range send {
			send[i] = value(r.me, s, i)
		}
		if err := r.comm.AllGather(ctx, ringtail.Float32s(send), ringtail.Float32s(recv)); err != nil {
			return "", err
		}
		return check(op, s, recv, func(i int) float32 { return value(i/c, s, i%c) }), nil
	case "reducescatter":
		c := max(n/r.np, 1)
		send, recv := r.buf[:c*r.np], r.out[:c]
		for i := range send {
			send[i] = value(r.me, s, i)
		}
		if err := r.comm.ReduceScatter(ctx, ringtail.Float32s(send), ringtail.Float32s(recv), ringtail.Sum); err != nil {
			return "", err
		}
		return check(op, s, recv, func(i int) float32 {
			var sum float32
			for q := range r.np {
				sum += value(q, s, r.me*c+i)
			}
			return sum
		}), nil
	default:
		return fmt.Sprintf("unknown op %q", op), nil
	}
}

// check compares got with want element by element (bit-exact).
func check(op string, s int, got []float32, want func(int) float32) string {
	for i, g := range got {
		if w := want(i); math.Float32bits(g) != math.Float32bits(w) {
			return fmt.Sprintf("%s at step %d: element %d is %v, want %v", op, s, i, g, w)
		}
	}
	return ""
}

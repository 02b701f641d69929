package ringtail

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A contribution posted compressed is decoded by the receiving link: an
// AllReduceTree folds it, and TakeContribution returns it, bit for bit as
// sent; Posting.Stats says what it cost on the wire.
func TestCompressedContributionsArrivePlain(t *testing.T) {
	const count = 40_000
	comms := startComms(t, 3, func(c *Config) { c.ChunkBytes = 16 << 10 })
	ctx := context.Background()
	sparse := func(v float32) []float32 {
		b := make([]float32, count)
		for i := 0; i < count; i += 9 {
			b[i] = v * float32(i%5+1)
		}
		return b
	}
	post, err := comms[2].ContributeAsyncWith(ctx, 0, Float32s(sparse(100)), 2, PostOptions{Compress: true})
	if err != nil {
		t.Fatal(err)
	}
	tree := Tree{Members: []int{0, 1}, Edges: []TreeEdge{{Child: 2, Parent: 0, Must: true}}, TagMask: 1}
	bufs := [][]float32{sparse(1), sparse(2)}
	noErrors(t, each(comms[:2], func(r int, c *Comm) error {
		_, err := c.AllReduceTree(ctx, Float32s(bufs[r]), tree)
		return err
	}))
	want := sparse(103)
	for r := range bufs {
		if !bytes.Equal(Float32s(bufs[r]).Bytes, Float32s(want).Bytes) {
			t.Fatalf("rank %d: the fold of a compressed contribution differs from the exact sum", r)
		}
	}
	if err := post.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	st, ok := post.Stats()
	if !ok || st.Bytes != 4*count || st.Frames != (4*count+16<<10-1)/(16<<10) || st.Compressed != st.Frames || st.WireBytes*4 > st.Bytes {
		t.Fatalf("stats %+v, %v", st, ok)
	}
	// TakeContribution, and a post without compression has no stats.
	plain, err := comms[1].ContributeAsync(ctx, 0, Float32s(sparse(7)), 9)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := comms[1].ContributeAsyncWith(ctx, 0, Float32s(sparse(5)), 8, PostOptions{Compress: true}); err != nil {
		t.Fatal(err)
	}
	for tag, v := range map[uint32]float32{8: 5, 9: 7} {
		c, err := comms[0].TakeContribution(ctx, 1, tag)
		if err != nil {
			t.Fatal(err)
		}
		if w := sparse(v); !bytes.Equal(c.Data.Bytes, Float32s(w).Bytes) {
			t.Fatalf("tag %d: contribution differs", tag)
		}
		c.Release()
	}
	if err := plain.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.Stats(); ok {
		t.Fatal("a plain post has compression stats")
	}
	if _, err := comms[1].ContributeAsyncWith(ctx, 0, Float32s(sparse(1)), MaxContributionTag+1, PostOptions{Compress: true}); err == nil ||
		!strings.Contains(err.Error(), "ContributeAsyncWith") {
		t.Fatalf("tag above the maximum: %v", err)
	}
}

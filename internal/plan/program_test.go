package plan

import "testing"

// exchange is a two-rank program: rank r sends its element 0 to the other
// rank and receives into element 1 with kind, dividing by div.
func exchange(r int, kind OpKind, div int) *Program {
	return &Program{Algorithm: "test", Rank: r, World: 2, DataLen: 2, Channels: []Channel{{Steps: []Step{{Ops: []Op{
		{Kind: Send, Peer: 1 - r, Buf: Data, Off: 0, Len: 1},
		{Kind: kind, Peer: 1 - r, Buf: Data, Off: 1, Len: 1, Div: div},
	}}}}}}
}

// A RecvReduce may divide what it folds (Avg fused into the last fold);
// no other network op takes a divisor, and none is negative.
func TestOnlyAFoldDivides(t *testing.T) {
	if err := exchange(0, RecvReduce, 2).Validate(); err != nil {
		t.Fatalf("a dividing fold: %v", err)
	}
	for _, p := range []*Program{exchange(0, Recv, 2), exchange(0, RecvReduce, -1)} {
		if err := p.Validate(); err == nil {
			t.Errorf("accepted %v", p.Channels[0].Steps[0].Ops[1])
		}
	}
	data := [][]float64{{6, 10}, {2, 4}}
	if err := Simulate([]*Program{exchange(0, RecvReduce, 2), exchange(1, RecvReduce, 4)}, data, nil, SimSum); err != nil {
		t.Fatal(err)
	}
	if data[0][1] != (10+2)/2.0 || data[1][1] != (4+6)/4.0 {
		t.Fatalf("simulated %v, want the folds divided: [_ 6] [_ 2.5]", data)
	}
}

package wire

import (
	"fmt"
	"strings"
)

// Collective names what a Data frame belongs to. The numeric values travel
// on the wire; do not reorder.
type Collective uint8

// Collectives.
const (
	// AllReduce reduces a buffer across the members in place.
	AllReduce Collective = iota + 1
	// Broadcast copies the root's buffer to every member.
	Broadcast
	// AllGather concatenates every member's input on every member.
	AllGather
	// ReduceScatter reduces and leaves one block per member.
	ReduceScatter
	// Barrier waits for every member (no payload).
	Barrier
	// PointToPoint is one Send matched with one Recv.
	PointToPoint
	// Eager is a message the receiver buffers whole on arrival, without a
	// posted receive, and collects by sender and tag (a child's gradient
	// for its parent, a coded payload, a result sent down a tree).
	Eager
	// AllToAll exchanges a block between every pair of members.
	AllToAll
	// Probe is a measurement exchange (latency and bandwidth of a pair).
	Probe
	// AllReduceTree is AllReduce among the members of a group into which
	// their evicted children's eager contributions are folded first
	// (Root: a hash of the child-to-parent edges).
	AllReduceTree
	// AllReduceLate is an AllReduce in which one member, named by Root,
	// is predicted to arrive late: the others reduce-scatter among
	// themselves first (ring.AllReduceLate).
	AllReduceLate
	maxCollective = AllReduceLate
)

var collectiveNames = [...]string{AllReduce: "AllReduce", Broadcast: "Broadcast", AllGather: "AllGather",
	ReduceScatter: "ReduceScatter", Barrier: "Barrier", PointToPoint: "Send/Recv", Eager: "Eager",
	AllToAll: "AllToAll", Probe: "Probe", AllReduceTree: "AllReduceTree", AllReduceLate: "AllReduceLate"}

// String returns the collective's name.
func (c Collective) String() string {
	if c >= AllReduce && c <= maxCollective {
		return collectiveNames[c]
	}
	return fmt.Sprintf("collective(%d)", uint8(c))
}

// Tagged reports whether Desc.Tag of c is a message tag (Eager and
// point-to-point), not a step label.
func (c Collective) Tagged() bool { return c == Eager || c == PointToPoint }

// Valid reports whether c is a known collective.
func (c Collective) Valid() bool { return c >= AllReduce && c <= maxCollective }

// The variants of an AllToAll, in Desc.Root, so that ranks calling
// different ones are caught like any other mismatch.
const (
	// AllToAllEven exchanges equal blocks; Count is the block's elements.
	AllToAllEven uint32 = iota
	// AllToAllCounts is AllToAllV's exchange of split sizes (two int64s
	// per pair: what the sender sends, what it expects back); Count is 2.
	AllToAllCounts
	// AllToAllUneven is AllToAllV's data. Count is 0: each pair's sizes
	// were agreed by the AllToAllCounts call just before.
	AllToAllUneven
)

var allToAllNames = [...]string{AllToAllEven: "even", AllToAllCounts: "split sizes", AllToAllUneven: "uneven"}

// World is the Group of a call that involves every rank.
const World uint32 = 0

// Desc describes the call a Data frame belongs to, as its sender made it.
// Every Data frame carries it, so a receiver compares it field by field
// with its own call and names exactly how a peer's call differs.
type Desc struct {
	// Collective is the call's kind.
	Collective Collective
	// DType is the element type (the root package's DType values).
	DType uint8
	// RedOp is the reduction operator (0 when the call reduces nothing).
	RedOp uint8
	// Root is the root rank of a rooted call (Broadcast), the variant of
	// an AllToAll (AllToAllEven, AllToAllCounts, AllToAllUneven), a hash
	// of the edges of an AllReduceTree, the late rank of AllReduceLate,
	// else 0.
	Root uint32
	// Group identifies the ranks taking part: World, or a hash of a
	// member list (a subgroup's own ring), or of a directed pair for
	// point-to-point calls.
	Group uint32
	// Tag is the application's tag of an Eager or point-to-point message.
	// Eager tags are partitioned by the engine (internal/engine.Class):
	// the top bit says which user of the mailbox a message is for. For
	// the other collectives it is the low 32 bits of the application's
	// step label of the call (ringtail.WithStep; 0 when unset), compared
	// like every other field so that a rank one step ahead or behind is
	// caught even when its call numbers agree.
	Tag uint32
	// Call numbers the calls of Group on the sending rank, from 1; every
	// member makes the same calls of a group in the same order, so a
	// rank that skips or adds one is caught at its first message.
	Call uint64
	// Count is the element count as the sender called it.
	Count uint64
}

// DescSize is the encoded size of a Desc.
const DescSize = 32

// PutDesc encodes d into b[:DescSize].
func PutDesc(b []byte, d *Desc) {
	_ = b[DescSize-1]
	b[0], b[1], b[2], b[3] = byte(d.Collective), d.DType, d.RedOp, 0
	le.PutUint32(b[4:], d.Root)
	le.PutUint32(b[8:], d.Group)
	le.PutUint32(b[12:], d.Tag)
	le.PutUint64(b[16:], d.Call)
	le.PutUint64(b[24:], d.Count)
}

// GetDesc decodes a Desc from b[:DescSize] (no validation: the caller
// compares it with its own).
func GetDesc(b []byte) Desc {
	_ = b[DescSize-1]
	return Desc{Collective: Collective(b[0]), DType: b[1], RedOp: b[2], Root: le.Uint32(b[4:]), Group: le.Uint32(b[8:]),
		Tag: le.Uint32(b[12:]), Call: le.Uint64(b[16:]), Count: le.Uint64(b[24:])}
}

// Field names one field of a Desc, for mismatch reports.
type Field uint8

// Desc fields, in the order a mismatch report names them: the first
// differing field is the most telling.
const (
	FieldNone Field = iota
	FieldGroup
	FieldCall
	FieldCollective
	FieldRoot
	FieldCount
	FieldDType
	FieldRedOp
	FieldTag
	FieldStep // Tag of a collective: the application's step label
)

var fieldNames = [...]string{"none", "group", "call number", "collective", "root", "count", "element type", "reduction op", "tag", "step"}

// String names the field.
func (f Field) String() string {
	if int(f) < len(fieldNames) {
		return fieldNames[f]
	}
	return fmt.Sprintf("field(%d)", uint8(f))
}

// Diff returns the first field in which d and o differ (FieldNone when
// they are equal).
func (d *Desc) Diff(o *Desc) Field {
	switch {
	case d.Group != o.Group:
		return FieldGroup
	case d.Call != o.Call:
		return FieldCall
	case d.Collective != o.Collective:
		return FieldCollective
	case d.Root != o.Root:
		return FieldRoot
	case d.Count != o.Count:
		return FieldCount
	case d.DType != o.DType:
		return FieldDType
	case d.RedOp != o.RedOp:
		return FieldRedOp
	case d.Tag != o.Tag:
		if d.Collective.Tagged() {
			return FieldTag
		}
		return FieldStep
	}
	return FieldNone
}

// Names renders element types and operators in Format (wire does not know
// the root package's names); nil functions print numbers.
type Names struct {
	DType func(uint8) string
	RedOp func(uint8) string
}

// Format renders d for error messages, e.g.
// "AllReduce #12 of group 0 (count=1024, float32, sum)".
func (d *Desc) Format(n Names) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v #%d", d.Collective, d.Call)
	if d.Group != World {
		fmt.Fprintf(&b, " of group %#x", d.Group)
	}
	dt := fmt.Sprintf("dtype %d", d.DType)
	if n.DType != nil {
		dt = n.DType(d.DType)
	}
	fmt.Fprintf(&b, " (count=%d, %s", d.Count, dt)
	if d.RedOp != 0 {
		op := fmt.Sprintf("op %d", d.RedOp)
		if n.RedOp != nil {
			op = n.RedOp(d.RedOp)
		}
		fmt.Fprintf(&b, ", %s", op)
	}
	if d.Collective == Broadcast {
		fmt.Fprintf(&b, ", root=%d", d.Root)
	}
	if d.Collective == AllToAll {
		if int(d.Root) < len(allToAllNames) {
			fmt.Fprintf(&b, ", %s", allToAllNames[d.Root])
		} else {
			fmt.Fprintf(&b, ", variant %d", d.Root)
		}
	}
	if d.Collective == AllReduceLate {
		fmt.Fprintf(&b, ", late=%d", d.Root)
	}
	if d.Collective.Tagged() {
		fmt.Fprintf(&b, ", tag=%d", d.Tag)
	} else if d.Tag != 0 {
		fmt.Fprintf(&b, ", step=%d", d.Tag)
	}
	b.WriteByte(')')
	return b.String()
}

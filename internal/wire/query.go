package wire

import "fmt"

// A rank that has waited long on a peer asks it what it is doing (a Query
// carrying the asker's call) and compares the answer (a State) with its
// own call: a peer that is in the same call with other arguments, or has
// already finished that call without sending what the asker waits for,
// disagrees with it — a mismatch no data frame would ever reveal, because
// neither side sends (two ranks that each believe the other is the root
// of a broadcast). A peer that is behind, or in the same call, is just
// slow, and the asker keeps waiting.

// QuerySize is the size of a Query payload: the asker's Desc.
const QuerySize = DescSize

// MarshalQuery encodes a Query payload.
func MarshalQuery(d *Desc) []byte {
	b := make([]byte, QuerySize)
	PutDesc(b, d)
	return b
}

// ParseQuery decodes a Query payload.
func ParseQuery(p []byte) (Desc, error) {
	if len(p) != QuerySize || p[3] != 0 {
		return Desc{}, fmt.Errorf("%w: query of %d bytes", ErrMalformed, len(p))
	}
	d := GetDesc(p)
	if !d.Collective.Valid() {
		return Desc{}, fmt.Errorf("%w: query for unknown collective %d", ErrMalformed, p[0])
	}
	return d, nil
}

// State answers a Query.
type State struct {
	// Active says the answering rank is inside a call now; Desc is that
	// call.
	Active bool
	Desc   Desc
	// Done is how many calls of the asker's group the answering rank has
	// completed.
	Done uint64
	// ForGroup and ForCall name the call the Query asked about (the
	// asker's), so an answer that arrives after the asker moved on to
	// another call is not taken for an answer about the new one.
	ForGroup uint32
	ForCall  uint64
}

// StateSize is the size of a State payload: Active, Desc, Done, ForCall,
// ForGroup and three zero bytes, so that every frame keeps the byte stream
// 8-byte aligned (shared-memory rings fold elements in place).
const StateSize = 1 + DescSize + 8 + 8 + 4 + 3

// Marshal encodes the State.
func (s *State) Marshal() []byte {
	b := make([]byte, StateSize)
	if s.Active {
		b[0] = 1
	}
	PutDesc(b[1:], &s.Desc)
	le.PutUint64(b[1+DescSize:], s.Done)
	le.PutUint64(b[1+DescSize+8:], s.ForCall)
	le.PutUint32(b[1+DescSize+16:], s.ForGroup)
	return b
}

// Answers reports whether the State answers a Query about call d.
func (s *State) Answers(d *Desc) bool { return s.ForGroup == d.Group && s.ForCall == d.Call }

// ParseState decodes a State payload.
func ParseState(p []byte) (State, error) {
	if len(p) != StateSize || p[0] > 1 || p[1+3] != 0 || p[StateSize-1] != 0 || p[StateSize-2] != 0 || p[StateSize-3] != 0 {
		return State{}, fmt.Errorf("%w: state of %d bytes", ErrMalformed, len(p))
	}
	s := State{Active: p[0] == 1, Desc: GetDesc(p[1:]), Done: le.Uint64(p[1+DescSize:]),
		ForCall: le.Uint64(p[1+DescSize+8:]), ForGroup: le.Uint32(p[1+DescSize+16:])}
	if s.Active && !s.Desc.Collective.Valid() {
		return State{}, fmt.Errorf("%w: state in unknown collective %d", ErrMalformed, p[1])
	}
	return s, nil
}

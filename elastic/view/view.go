package view

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// MaxNameLen bounds a node name (names travel in every proposal).
const MaxNameLen = 128

// MaxMembers bounds the members of one view.
const MaxMembers = 4096

// View is one generation of an elastic job.
type View struct {
	// Gen is the generation number; every proposal takes a number higher
	// than any the proposer has seen. Generation 0 means "no view yet".
	Gen uint64 `json:"gen"`
	// Members are node names in rank order: Members[i] is rank i of the
	// generation's communicator.
	Members []string `json:"members"`
	// Proposer is the node that proposed the view (and hosts Coord).
	Proposer string `json:"proposer"`
	// Coord is the host:port of the generation's rendezvous.
	Coord string `json:"coord"`
}

// ErrInvalid is wrapped by Validate's errors.
var ErrInvalid = errors.New("view: invalid view")

// Validate reports a malformed view (as received from the network).
func (v View) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case v.Gen == 0:
		return bad("generation 0")
	case len(v.Members) == 0 || len(v.Members) > MaxMembers:
		return bad("%d members (want 1..%d)", len(v.Members), MaxMembers)
	case v.Proposer == "":
		return bad("no proposer")
	case v.Coord == "" || len(v.Coord) > 256:
		return bad("coordinator address %q", v.Coord)
	}
	seen := make(map[string]bool, len(v.Members))
	for _, m := range v.Members {
		if err := ValidateName(m); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if seen[m] {
			return bad("member %q listed twice", m)
		}
		seen[m] = true
	}
	if !seen[v.Proposer] {
		return bad("proposer %q is not a member", v.Proposer)
	}
	return nil
}

// ValidateName checks a node name: 1..MaxNameLen printable ASCII bytes
// without spaces.
func ValidateName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("node name %q must be 1..%d bytes", name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("node name %q has a byte outside printable ASCII", name)
		}
	}
	return nil
}

// RankOf returns name's rank in v, or -1.
func (v View) RankOf(name string) int { return slices.Index(v.Members, name) }

// Contains reports whether name is a member of v.
func (v View) Contains(name string) bool { return v.RankOf(name) >= 0 }

// Size returns the number of members.
func (v View) Size() int { return len(v.Members) }

// Supersedes reports whether v takes precedence over w: a higher
// generation, or the same generation from a proposer with a smaller name
// (two nodes that both believed they were the proposer). Every node applies
// the same order, so all adopt the same view.
func (v View) Supersedes(w View) bool {
	if v.Gen != w.Gen {
		return v.Gen > w.Gen
	}
	return v.Proposer < w.Proposer
}

// Equal reports whether v and w are the same view.
func (v View) Equal(w View) bool {
	return v.Gen == w.Gen && v.Proposer == w.Proposer && v.Coord == w.Coord && slices.Equal(v.Members, w.Members)
}

// Hash is a SHA-256 digest of the canonical encoding of v.
func (v View) Hash() [32]byte {
	h := sha256.New()
	var b [8]byte
	h.Write([]byte("ringtail elastic view v1\x00"))
	binary.LittleEndian.PutUint64(b[:], v.Gen)
	h.Write(b[:])
	put := func(s string) {
		binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
		h.Write(b[:])
		h.Write([]byte(s))
	}
	binary.LittleEndian.PutUint64(b[:], uint64(len(v.Members)))
	h.Write(b[:])
	for _, m := range v.Members {
		put(m)
	}
	put(v.Proposer)
	put(v.Coord)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// Digest is the first 62 bits of Hash as a non-negative int64, so that an
// all-reduce with Max over (d, −d) checks that every rank holds the same
// view in one collective.
func (v View) Digest() int64 {
	h := v.Hash()
	return int64(binary.LittleEndian.Uint64(h[:8]) >> 2)
}

// String renders the view for logs.
func (v View) String() string {
	return fmt.Sprintf("gen %d [%s] by %s at %s", v.Gen, strings.Join(v.Members, " "), v.Proposer, v.Coord)
}

package view

import (
	"errors"
	"testing"
)

func TestViewHashAndOrder(t *testing.T) {
	v := View{Gen: 3, Members: []string{"a", "b", "c"}, Proposer: "a", Coord: "127.0.0.1:5"}
	if err := v.Validate(); err != nil {
		t.Fatal(err)
	}
	w := v
	w.Members = []string{"a", "c", "b"}
	if v.Hash() == w.Hash() || v.Digest() == w.Digest() {
		t.Fatal("rank order does not change the hash")
	}
	// Length-prefixed: moving bytes between fields changes the hash.
	x := View{Gen: 3, Members: []string{"ab", "c"}, Proposer: "ab", Coord: "z"}
	y := View{Gen: 3, Members: []string{"a", "bc"}, Proposer: "a", Coord: "z"}
	if x.Hash() == y.Hash() {
		t.Fatal("hash is ambiguous")
	}
	if d := v.Digest(); d < 0 || d >= 1<<62 {
		t.Fatalf("digest %d outside [0, 2^62)", d)
	}
	if v.RankOf("c") != 2 || v.RankOf("z") != -1 || !v.Contains("b") {
		t.Fatal("RankOf/Contains")
	}
	later := View{Gen: 4, Members: []string{"b"}, Proposer: "b", Coord: "x"}
	if !later.Supersedes(v) || v.Supersedes(later) {
		t.Fatal("higher generation must win")
	}
	tie := View{Gen: 3, Members: []string{"b"}, Proposer: "b", Coord: "x"}
	if tie.Supersedes(v) || !v.Supersedes(tie) {
		t.Fatal("same generation: smaller proposer must win")
	}
	if v.Supersedes(v) {
		t.Fatal("a view supersedes itself")
	}
}

func TestViewValidate(t *testing.T) {
	for name, v := range map[string]View{
		"gen0":        {Members: []string{"a"}, Proposer: "a", Coord: "x"},
		"empty":       {Gen: 1, Proposer: "a", Coord: "x"},
		"dup":         {Gen: 1, Members: []string{"a", "a"}, Proposer: "a", Coord: "x"},
		"outsider":    {Gen: 1, Members: []string{"a"}, Proposer: "b", Coord: "x"},
		"space":       {Gen: 1, Members: []string{"a b"}, Proposer: "a b", Coord: "x"},
		"no coord":    {Gen: 1, Members: []string{"a"}, Proposer: "a"},
		"no proposer": {Gen: 1, Members: []string{"a"}, Coord: "x"},
	} {
		if err := v.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Self: "a", MinNP: 2, MaxNP: 4, InitialNP: 3, StartTimeout: 1, MinWait: 1, EvidenceTTL: 1, FormTimeout: 1, RetryBackoff: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"self":    func(c *Config) { c.Self = "" },
		"min":     func(c *Config) { c.MinNP = 0 },
		"max":     func(c *Config) { c.MaxNP = 1 },
		"initial": func(c *Config) { c.InitialNP = 5 },
		"timeout": func(c *Config) { c.MinWait = 0 },
	} {
		c := good
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

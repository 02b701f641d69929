package gradcode

import (
	"errors"
	"fmt"
	"math"
	"math/rand"

	"gonum.org/v1/gonum/mat"
)

// Plan is a complete gradient-coding strategy. It is plain data, computed
// deterministically from a Config, so every rank that builds it from the same
// Config holds the same Plan. Do not modify a Plan after construction.
type Plan struct {
	// Scheme is the scheme the plan follows.
	Scheme Scheme `json:"scheme"`
	// Construction says how B was chosen.
	Construction Construction `json:"construction"`
	// N is the number of workers, S the number of stragglers tolerated and K
	// the number of data partitions.
	N int `json:"n"`
	S int `json:"s"`
	K int `json:"k"`
	// Assignment lists, per worker, the partitions it computes, in the order
	// Encode expects their gradients (cyclic order of the scheme).
	Assignment [][]int `json:"assignment"`
	// B is the n×k encoding matrix: worker i sends Σ_j B[i][j]·g_j, and
	// B[i][j] ≠ 0 only for partitions j in Assignment[i].
	B [][]float64 `json:"B"`
	// Groups are disjoint sets of workers (ascending ranks) that cover the
	// data exactly once with coefficient 1: when all members of one have
	// reported, the 0/1 indicator of the group decodes. Ordered by size, then
	// ranks; Decode uses the first complete one.
	Groups [][]int `json:"groups"`
	// PayloadDType is the wire type of coded payloads.
	PayloadDType DType `json:"payload_dtype"`
	// Quality is the plan's measured numerical behaviour.
	Quality Quality `json:"quality"`
}

// Candidate auxiliary palettes tried when more than one extra colour is
// needed; the one with the smallest sampled class bound is kept.
const paletteCandidates = 8

// NewPlan builds the plan described by cfg (validated first). The result
// depends only on cfg. Errors wrap ErrInvalidConfig, or ErrNotDecodable when
// no construction tolerates s stragglers (which would be a bug for s < n).
func NewPlan(cfg Config) (*Plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	target := cfg.TargetRelErr
	if target == 0 {
		target = defaultTarget(cfg.N)
	}
	var (
		p     *Plan
		aux   float64
		bound ampBound
		err   error
	)
	switch cfg.Scheme {
	case Cyclic:
		p, aux, bound, err = newCyclic(cfg)
	default:
		p, aux, bound, err = newHetero(cfg)
	}
	if err != nil {
		return nil, err
	}
	if err := p.finish(target, cfg.PayloadDType, aux, bound, cfg.Seed); err != nil {
		return nil, fmt.Errorf("gradcode: %s plan n=%d s=%d: %w", cfg.Scheme, cfg.N, cfg.S, err)
	}
	return p, nil
}

// newCyclic builds the cyclic scheme: Tandon's random H for Random, the
// block-coloured palette for Structured.
func newCyclic(cfg Config) (*Plan, float64, ampBound, error) {
	n, s := cfg.N, cfg.S
	p := &Plan{
		Scheme:       Cyclic,
		Construction: cfg.construction(),
		N:            n,
		S:            s,
		K:            n,
		Assignment:   tandonSupport(n, s),
		Groups:       [][]int{},
	}
	rng := rand.New(rand.NewSource(cfg.Seed))
	if p.Construction == Random {
		var h *mat.Dense // s = 0 needs no H
		if s > 0 {
			h = randomTandonH(n, s, rng)
		}
		var cond float64
		var err error
		p.B, cond, err = tandonB(n, s, h)
		return p, cond, ampBound{}, err
	}
	colours, ncolours := blockColouring(n, s)
	hold := holders(p.Assignment, n)
	cond, bound, err := p.buildPalette(rng, hold, make([]bool, n), s+1, colours, ncolours)
	if err != nil {
		return nil, 0, ampBound{}, err
	}
	p.Groups = unitColourClasses(colours, ncolours, p.Assignment, p.B, p.K)
	return p, cond, bound, nil
}

// newHetero builds the Hetero and Group schemes on Alg. 1's assignment.
func newHetero(cfg Config) (*Plan, float64, ampBound, error) {
	n, s := cfg.N, cfg.S
	c := cfg.throughputs()
	k := cfg.K
	if k == 0 {
		k = autoPartitions(c, s, cfg.construction() == Structured)
	}
	load, err := loads(c, s, k)
	if err != nil {
		return nil, 0, ampBound{}, err
	}
	p := &Plan{
		Scheme:       cfg.Scheme,
		Construction: cfg.construction(),
		N:            n,
		S:            s,
		K:            k,
		Assignment:   cyclicCopies(load, k),
		Groups:       [][]int{},
	}
	hold := holders(p.Assignment, k)
	inGroup := make([]bool, n)
	if cfg.Scheme == Group {
		p.Groups = pruneGroups(findAllGroups(p.Assignment, k), n)
		for _, g := range p.Groups {
			for _, w := range g {
				inGroup[w] = true
			}
		}
	}
	var leftover []int
	for i, l := range load {
		if l > 0 && !inGroup[i] {
			leftover = append(leftover, i)
		}
	}
	d := s + 1 - len(p.Groups)
	rng := rand.New(rand.NewSource(cfg.Seed))
	if p.Construction == Random {
		var cond float64
		p.B, cond, err = auxiliaryB(n, k, hold, inGroup, randomAuxiliary(n, d, leftover, rng))
		return p, cond, ampBound{}, err
	}
	colours, ncolours := conflictColouring(n, leftover, hold)
	if d == 0 {
		ncolours = 0
	}
	cond, bound, err := p.buildPalette(rng, hold, inGroup, d, colours, ncolours)
	if err != nil {
		return nil, 0, ampBound{}, err
	}
	extra := unitColourClasses(colours, ncolours, p.Assignment, p.B, p.K)
	p.Groups = append(p.Groups, extra...)
	sortGroups(p.Groups)
	return p, cond, bound, nil
}

// buildPalette sets p.B from the structured auxiliary matrix for the given
// colouring of the non-group workers (d basis colours plus extras). With more
// than one extra colour several palettes are drawn and the one with the
// smallest class bound on a sample of class sets is kept ("rejecting
// ill-conditioned draws"). It returns the largest window condition number
// and the certified (or sampled) class bound of the kept palette.
func (p *Plan) buildPalette(rng *rand.Rand, hold [][]int, inGroup []bool, d int, colours []int, ncolours int) (float64, ampBound, error) {
	extras := max(ncolours-d, 0)
	tries := 1
	if extras > 1 {
		tries = paletteCandidates
	}
	v := make([]float64, p.S+1)
	for i := range v {
		v[i] = 1
	}
	var (
		bestB       [][]float64
		bestClasses []colourClass
		bestCond    float64
		bestErr     error
	)
	bestScore := math.Inf(1)
	for t := 0; t < tries; t++ {
		aux := paletteAuxiliary(p.N, d, colours, designExtras(d, extras, t, rng))
		b, cond, err := auxiliaryB(p.N, p.K, hold, inGroup, aux)
		if err != nil {
			if bestErr == nil {
				bestErr = err
			}
			continue
		}
		classes := structuredClasses(p.Groups, colours, ncolours, aux, p.S)
		score := 0.0
		if tries > 1 {
			score, _ = classBound(classes, v, b, p.K, p.S, boundSelect, boundSelect, rng)
		}
		if bestB == nil || score < bestScore {
			bestB, bestClasses, bestCond, bestScore = b, classes, cond, score
		}
	}
	if bestB == nil {
		return 0, ampBound{}, fmt.Errorf("gradcode: no usable palette for n=%d s=%d: %w", p.N, p.S, errors.Join(ErrNotDecodable, bestErr))
	}
	p.B = bestB
	amp, certified := classBound(bestClasses, v, p.B, p.K, p.S, boundExhaustive, boundSampled, rng)
	return bestCond, ampBound{amp: amp, certified: certified, known: true}, nil
}

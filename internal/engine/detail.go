package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// The call-site check (RINGTAIL_DEBUG=detail, Settings.Detail). Shapes
// travel in every frame, so ranks that call different shapes are caught
// anyway; but a rank that skips one of two calls of the same shape makes
// its next call where the others make the skipped one, and nothing a
// frame carries tells them apart. Their call sites do: before each
// collective, the members gather each other's call-site fingerprints
// (8 bytes each), and when they differ they gather the call sites' names
// and every member fails naming them, the same way on every rank.

// siteTextLen bounds a call site's name as gathered.
const siteTextLen = 256

// checkSiteLocked runs the check before c (which carries its site): err is
// the mismatch when differ, else the failure of the check's own exchange.
// The members gather with a Sum allreduce of buffers in which each fills
// only its own block (zeros elsewhere: every sum is exact), which every
// group supports, a subgroup's too.
func (e *Engine) checkSiteLocked(ctx context.Context, c *Call) (differ bool, err error) {
	sp := &c.Spec
	if e.mesh == nil || sp.Collective == wire.PointToPoint || sp.Collective == wire.AllReduceTree || sp.Collective == wire.Eager {
		return false, nil
	}
	ranks := sp.Members
	if ranks == nil {
		ranks = make([]int, e.s.WorldSize)
		for i := range ranks {
			ranks[i] = i
		}
	}
	me := slices.Index(ranks, e.s.Rank)
	gather := func(block int, mine []byte, purpose string) ([]byte, error) {
		all := make([]byte, block*len(ranks))
		copy(all[block*me:], mine)
		chk := &Call{Spec: algo.Spec{Collective: wire.AllReduce, Count: len(all), ElemSize: 1, Members: sp.Members},
			DType: reduce.Uint8, Op: reduce.Sum, Data: all, Purpose: purpose}
		return all, e.execLocked(ctx, chk, algo.Choice{}, nil)
	}
	var fp [8]byte
	binary.LittleEndian.PutUint64(fp[:], c.SiteFP)
	fps, err := gather(8, fp[:], "call-site check")
	if err != nil {
		return false, err
	}
	same := true
	for i := 8; i < len(fps); i += 8 {
		if !bytes.Equal(fps[i:i+8], fps[:8]) {
			same = false
			break
		}
	}
	if same {
		return false, nil
	}
	text := make([]byte, siteTextLen)
	copy(text, c.Site)
	texts, err := gather(siteTextLen, text, "call-site names")
	if err != nil {
		return false, err
	}
	te := e.siteMismatch(c, ranks, fps, texts)
	e.mesh.Fail(te)
	return true, e.mesh.Err()
}

// siteMismatch builds the error every member reports: the call sites and
// the ranks that called from each, blaming the lowest rank outside the
// largest group of ranks calling from one site (the group holding the
// lowest rank on a tie). Every member computes it from the same gathered
// bytes.
func (e *Engine) siteMismatch(c *Call, ranks []int, fps, texts []byte) *transport.Error {
	type site struct {
		fp    string
		name  string
		ranks []int
	}
	var sites []*site
	for i, r := range ranks {
		fp := string(fps[8*i : 8*i+8])
		var s *site
		for _, x := range sites {
			if x.fp == fp {
				s = x
			}
		}
		if s == nil {
			name := string(bytes.TrimRight(texts[siteTextLen*i:siteTextLen*(i+1)], "\x00"))
			s = &site{fp: fp, name: name}
			sites = append(sites, s)
		}
		s.ranks = append(s.ranks, r)
	}
	sort.SliceStable(sites, func(i, j int) bool {
		if len(sites[i].ranks) != len(sites[j].ranks) {
			return len(sites[i].ranks) < len(sites[j].ranks)
		}
		return sites[i].ranks[0] > sites[j].ranks[0]
	})
	// sites: the odd ones out first, the norm last.
	culprit := sites[0].ranks[0]
	for _, s := range sites[:len(sites)-1] {
		culprit = min(culprit, s.ranks[0])
	}
	_, gk, _ := e.keyOf(c)
	num := e.groupOf(gk).done + 1
	var parts []string
	for _, s := range sites {
		parts = append(parts, fmt.Sprintf("%s from %s", flight.RanksText(s.ranks), s.name))
	}
	me := e.s.Rank
	detail := fmt.Sprintf("call sites differ in %v #%d (count=%d): %s: a rank skipped or added a call (RINGTAIL_DEBUG=detail)",
		c.Spec.Collective, num, c.Spec.Count, strings.Join(parts, "; "))
	return &transport.Error{Kind: transport.KindMismatch, Rank: culprit, Reporter: me, Local: me, Detail: detail}
}

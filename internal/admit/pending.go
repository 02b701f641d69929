package admit

import "container/list"

// pendingSet is the pure bookkeeping of a Gate: pending entries in
// admission order, overall and per source, and the choice of which to
// evict.
type pendingSet struct {
	max, perSource int
	all            *list.List            // of *entry, oldest first
	bySource       map[string]*list.List // of *entry, oldest first
}

// entry is one pending connection.
type entry struct {
	source   string
	all, src *list.Element
	value    any
}

func newPendingSet(max, perSource int) *pendingSet {
	return &pendingSet{max: max, perSource: perSource, all: list.New(), bySource: map[string]*list.List{}}
}

// evictReason says why an entry was evicted.
type evictReason string

const (
	evictSourceFull evictReason = "too many unauthenticated connections from this source"
	evictGateFull   evictReason = "too many unauthenticated connections"
)

// add admits a new entry from source, first removing the entry it must
// evict to stay within the limits (if any), which it returns with the
// reason.
func (p *pendingSet) add(source string, value any) (added, evicted *entry, why evictReason) {
	if l := p.bySource[source]; l != nil && l.Len() >= p.perSource {
		evicted, why = l.Front().Value.(*entry), evictSourceFull
	} else if p.all.Len() >= p.max {
		evicted, why = p.all.Front().Value.(*entry), evictGateFull
	}
	if evicted != nil {
		p.remove(evicted)
	}
	e := &entry{source: source, value: value}
	e.all = p.all.PushBack(e)
	l := p.bySource[source]
	if l == nil {
		l = list.New()
		p.bySource[source] = l
	}
	e.src = l.PushBack(e)
	return e, evicted, why
}

// remove drops e; it reports false if e was not pending (already
// removed or evicted).
func (p *pendingSet) remove(e *entry) bool {
	if e.all == nil {
		return false
	}
	p.all.Remove(e.all)
	l := p.bySource[e.source]
	l.Remove(e.src)
	if l.Len() == 0 {
		delete(p.bySource, e.source)
	}
	e.all, e.src = nil, nil
	return true
}

// len returns the number of pending entries.
func (p *pendingSet) len() int { return p.all.Len() }

// sources returns the number of sources with pending entries.
func (p *pendingSet) sources() int { return len(p.bySource) }

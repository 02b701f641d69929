package topology

import "math"

// flowGraph is a small min-cost-flow network with integer costs, solved by
// successive shortest paths with Dijkstra over reduced costs. All arc
// costs added must be non-negative. It is deterministic: ties go to the
// lower node and the earlier arc.
type flowGraph struct {
	adj  [][]int // node → arc indices, in insertion order
	to   []int
	cap  []int
	cost []int64
}

func newFlowGraph(nodes int) *flowGraph {
	return &flowGraph{adj: make([][]int, nodes)}
}

// addArc adds an arc u→v with capacity c and cost w, and its residual
// twin, and returns the arc's index.
func (g *flowGraph) addArc(u, v, c int, w int64) int {
	id := len(g.to)
	g.to = append(g.to, v, u)
	g.cap = append(g.cap, c, 0)
	g.cost = append(g.cost, w, -w)
	g.adj[u] = append(g.adj[u], id)
	g.adj[v] = append(g.adj[v], id+1)
	return id
}

// flow returns the flow on arc id.
func (g *flowGraph) flow(id int) int { return g.cap[id^1] }

// run sends up to want units from s to t along successive cheapest paths
// and returns how many units it sent.
func (g *flowGraph) run(s, t, want int) int {
	n := len(g.adj)
	pot := make([]int64, n) // all costs start non-negative: zero potentials are valid
	dist := make([]int64, n)
	via := make([]int, n)
	var queue nodeQueue
	sent := 0
	for sent < want {
		for i := range dist {
			dist[i], via[i] = math.MaxInt64, -1
		}
		dist[s] = 0
		pq := append(queue[:0], queued{node: s})
		for len(pq) > 0 {
			it := pq.pop()
			if it.dist != dist[it.node] {
				continue
			}
			u := it.node
			for _, a := range g.adj[u] {
				if g.cap[a] == 0 {
					continue
				}
				v := g.to[a]
				nd := dist[u] + g.cost[a] + pot[u] - pot[v]
				if nd < dist[v] {
					dist[v], via[v] = nd, a
					pq.push(queued{node: v, dist: nd})
				}
			}
		}
		queue = pq
		if dist[t] == math.MaxInt64 {
			break
		}
		for i := range pot {
			if dist[i] < math.MaxInt64 {
				pot[i] += dist[i]
			}
		}
		for v := t; v != s; v = g.to[via[v]^1] {
			g.cap[via[v]]--
			g.cap[via[v]^1]++
		}
		sent++
	}
	return sent
}

// queued is a node waiting in Dijkstra's queue.
type queued struct {
	node int
	dist int64
}

// nodeQueue is a binary min-heap of queued nodes by distance, then node
// number.
type nodeQueue []queued

func (q nodeQueue) less(i, j int) bool {
	if q[i].dist != q[j].dist {
		return q[i].dist < q[j].dist
	}
	return q[i].node < q[j].node
}

func (q *nodeQueue) push(it queued) {
	*q = append(*q, it)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *nodeQueue) pop() queued {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h.less(l, m) {
			m = l
		}
		if r < len(h) && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

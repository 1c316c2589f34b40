package dashboard

import (
	"slices"
	"sort"
	"strconv"

	"github.com/yella-go/yella"
)

// The event graph, laid out in layers from top to bottom: a process sits
// one layer below the deepest process that emits an event it listens to.
// Cycles are broken at the edges that close them, which are drawn as
// loops on the right. Events declared in Emits that no process listens to
// are drawn as dashed "no listener" nodes.

const (
	nodeW, nodeH = 184, 50
	gapX, gapY   = 28, 70
	margin       = 16
	loopRoom     = 70 // right of the nodes, for back edges
)

type graphView struct {
	W, H   int
	Nodes  []gnode
	Edges  []gedge
	Labels []glabel
	Empty  bool
}

type gnode struct {
	X, Y     int
	Name     string // full name, for the tooltip
	Label    string // clipped to fit
	On       string
	URL      string
	InFlight int
	Dropped  int64
	Dangling bool // an emitted event nobody listens to
}

type gedge struct {
	D    string
	Back bool
	Dead bool // to a dangling event
}

type glabel struct {
	X, Y int
	Text string
}

type gvertex struct {
	node  gnode
	out   []int
	event map[int]string // target → event name
	layer int
	order float64
}

func newGraph(g yella.Graph, pm map[string]yella.ProcessMetrics) graphView {
	if len(g.Nodes) == 0 {
		return graphView{Empty: true}
	}
	var vs []*gvertex
	index := map[string]int{}
	add := func(n gnode) int {
		vs = append(vs, &gvertex{node: n, event: map[int]string{}})
		return len(vs) - 1
	}
	for _, n := range g.Nodes {
		m := pm[n.Name]
		index[n.Name] = add(gnode{Name: n.Name, Label: clip(n.Name, 24), On: clip(n.On, 28),
			URL: runsFilter{Process: n.Name, Limit: defPageLimit}.url("/runs"), InFlight: m.InFlight, Dropped: m.Dropped})
	}
	heard := map[string]bool{}
	for _, e := range g.Edges {
		from, to := index[e.From], index[e.To]
		if _, dup := vs[from].event[to]; !dup {
			vs[from].out = append(vs[from].out, to)
			vs[from].event[to] = e.Event
		}
		heard[e.From+"\x00"+e.Event] = true
	}
	for _, n := range g.Nodes {
		for _, ev := range n.Emits {
			if heard[n.Name+"\x00"+ev] {
				continue
			}
			heard[n.Name+"\x00"+ev] = true
			d := add(gnode{Name: ev, Label: clip(ev, 24), On: "no listener", Dangling: true,
				URL: runsFilter{Event: ev, Limit: defPageLimit}.url("/runs")})
			from := index[n.Name]
			vs[from].out = append(vs[from].out, d)
			vs[from].event[d] = ev
		}
	}
	back := layer(vs)
	layers := order(vs)
	return place(vs, layers, back)
}

// layer assigns layers by longest path over the graph without the edges
// that close cycles (found by a depth-first search), which it returns.
func layer(vs []*gvertex) map[[2]int]bool {
	back := map[[2]int]bool{}
	state := make([]int, len(vs)) // 0 new, 1 on the stack, 2 done
	var post []int
	var dfs func(v int)
	dfs = func(v int) {
		state[v] = 1
		for _, w := range vs[v].out {
			switch state[w] {
			case 0:
				dfs(w)
			case 1:
				back[[2]int{v, w}] = true
			}
		}
		state[v] = 2
		post = append(post, v)
	}
	for v := range vs {
		if state[v] == 0 {
			dfs(v)
		}
	}
	for i := len(post) - 1; i >= 0; i-- { // reverse post-order is topological
		v := post[i]
		for _, w := range vs[v].out {
			if !back[[2]int{v, w}] && vs[w].layer < vs[v].layer+1 {
				vs[w].layer = vs[v].layer + 1
			}
		}
	}
	return back
}

// order arranges each layer to reduce crossings: by name first, then by
// the mean position of each node's parents in the layer above.
func order(vs []*gvertex) [][]int {
	var layers [][]int
	for v, x := range vs {
		for len(layers) <= x.layer {
			layers = append(layers, nil)
		}
		layers[x.layer] = append(layers[x.layer], v)
	}
	for _, l := range layers {
		sort.SliceStable(l, func(i, j int) bool { return vs[l[i]].node.Name < vs[l[j]].node.Name })
		for i, v := range l {
			vs[v].order = float64(i)
		}
	}
	parents := make([][]int, len(vs))
	for v, x := range vs {
		for _, w := range x.out {
			parents[w] = append(parents[w], v)
		}
	}
	for pass := 0; pass < 2; pass++ {
		for li := 1; li < len(layers); li++ {
			l := layers[li]
			key := map[int]float64{}
			for _, v := range l {
				sum, n := 0.0, 0
				for _, p := range parents[v] {
					if vs[p].layer == li-1 {
						sum += vs[p].order
						n++
					}
				}
				key[v] = vs[v].order
				if n > 0 {
					key[v] = sum / float64(n)
				}
			}
			sort.SliceStable(l, func(i, j int) bool { return key[l[i]] < key[l[j]] })
			for i, v := range l {
				vs[v].order = float64(i)
			}
		}
	}
	return layers
}

// place computes coordinates and edge paths.
func place(vs []*gvertex, layers [][]int, back map[[2]int]bool) graphView {
	widest := 0
	for _, l := range layers {
		widest = max(widest, len(l))
	}
	inner := widest*(nodeW+gapX) - gapX
	gv := graphView{W: inner + 2*margin, H: len(layers)*(nodeH+gapY) - gapY + 2*margin}
	if len(back) > 0 {
		gv.W += loopRoom
	}
	for li, l := range layers {
		x0 := margin + (inner-(len(l)*(nodeW+gapX)-gapX))/2
		for i, v := range l {
			vs[v].node.X = x0 + i*(nodeW+gapX)
			vs[v].node.Y = margin + li*(nodeH+gapY)
		}
	}
	// A fan-out (one event, several listeners) gets one label, on its
	// straightest edge, a third of the way down.
	type group struct {
		from  int
		event string
	}
	best := map[group]glabel{}
	bestDX := map[group]int{}
	for v, x := range vs {
		a := x.node
		for _, w := range x.out {
			b := vs[w].node
			e := gedge{Dead: b.Dangling}
			if back[[2]int{v, w}] || vs[w].layer <= x.layer {
				var lx, ly int
				e.Back = true
				e.D, lx, ly = loopPath(a, b, v == w)
				gv.Labels = append(gv.Labels, glabel{X: lx, Y: ly, Text: clip(x.event[w], 26)})
			} else {
				var lx, ly int
				e.D, lx, ly = downPath(a, b)
				g, dx := group{v, x.event[w]}, abs(b.X-a.X)
				if d, ok := bestDX[g]; !ok || dx < d {
					best[g], bestDX[g] = glabel{X: lx, Y: ly, Text: clip(x.event[w], 26)}, dx
				}
			}
			gv.Edges = append(gv.Edges, e)
		}
	}
	for _, l := range best {
		gv.Labels = append(gv.Labels, l)
	}
	slices.SortFunc(gv.Labels, func(a, b glabel) int { return a.Y*100000 + a.X - (b.Y*100000 + b.X) })
	for _, x := range vs {
		gv.Nodes = append(gv.Nodes, x.node)
	}
	slices.SortStableFunc(gv.Nodes, func(a, b gnode) int { return a.Y*100000 + a.X - (b.Y*100000 + b.X) })
	return gv
}

// downPath is a curve from the bottom of a to the top of b, and where
// its label goes (a third of the way along).
func downPath(a, b gnode) (string, int, int) {
	x1, y1 := a.X+nodeW/2, a.Y+nodeH
	x2, y2 := b.X+nodeW/2, b.Y-6
	my := (y1 + y2) / 2
	// The cubic at t = 1/3: (8·P0 + 12·P1 + 6·P2 + P3) / 27.
	lx := (20*x1 + 7*x2) / 27
	ly := (8*y1+12*my+6*my+y2)/27 + 4
	return "M" + itoa(x1) + "," + itoa(y1) + "C" + itoa(x1) + "," + itoa(my) + " " + itoa(x2) + "," + itoa(my) + " " + itoa(x2) + "," + itoa(y2),
		lx, ly
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// loopPath goes out of a's right side and into b's (or back into a).
func loopPath(a, b gnode, self bool) (string, int, int) {
	x1, y1 := a.X+nodeW, a.Y+nodeH/2
	x2, y2 := b.X+nodeW, b.Y+nodeH/2
	if self {
		y1, y2 = a.Y+nodeH/3, a.Y+2*nodeH/3
	}
	k := max(x1, x2) + 44
	return "M" + itoa(x1) + "," + itoa(y1) + "C" + itoa(k) + "," + itoa(y1) + " " + itoa(k) + "," + itoa(y2) + " " + itoa(x2+6) + "," + itoa(y2),
		k - 8, (y1+y2)/2 + 4
}

func itoa(n int) string { return strconv.Itoa(n) }

package dashboard

import (
	"net/http"
	"sort"

	"github.com/yella-go/yella"
)

// nodeLimit bounds the nodes the nodes page lists.
const nodeLimit = 200

type nodesData struct {
	layout
	Shared     bool
	Self       string
	Rows       []nodeRow
	Live, Gone int
	Limited    bool // the list stopped at nodeLimit
}

// nodeRow is a node with the runs it holds, by process, in name order.
type nodeRow struct {
	yella.Node
	Held []heldRuns
}

// heldRuns is how many runs of one process a node holds, with the link to
// that process's running runs.
type heldRuns struct {
	Process string
	N       int64
	URL     string
}

// nodes is the nodes page: the engine processes sharing the store, live
// and gone, and what each holds; on a single-node store, a note that says
// so.
func (s *server) nodes(w http.ResponseWriter, r *http.Request) {
	d := &nodesData{layout: s.newLayout(r, "nodes", "Nodes")}
	list, err := s.eng.Nodes(r.Context(), nodeLimit)
	if err != nil {
		s.engineError(w, r, err)
		return
	}
	d.Shared, d.Self, d.Limited = list.Shared, list.Self, len(list.Nodes) == nodeLimit
	for _, n := range list.Nodes {
		if n.Gone {
			d.Gone++
		} else {
			d.Live++
		}
		row := nodeRow{Node: n}
		for p, c := range n.ByProcess {
			row.Held = append(row.Held, heldRuns{Process: p, N: c,
				URL: runsFilter{Process: p, Status: yella.StatusRunning, Limit: defPageLimit}.url("/runs")})
		}
		sort.Slice(row.Held, func(i, j int) bool { return row.Held[i].Process < row.Held[j].Process })
		d.Rows = append(d.Rows, row)
	}
	s.render(w, r, http.StatusOK, "nodes", d)
}

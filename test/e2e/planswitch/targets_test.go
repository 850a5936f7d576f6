package planswitch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// The targets of the differential. The plan lists each Service's first
// sync, with the nodes as they are; the switch's first sync may run before
// or after the nodes change (a node deleted, one joining initialised), and
// its node syncs then register or deregister what changed, so their calls
// vary with timing. What does not vary is where they end: per Service and
// per backend, the nodes its load balancer targets once the switch settled
// must be those the plan predicts (ServicePlan.Targets), in every target
// group (aws) and every pool (Octavia). The calls that set targets
// (RegisterTargets, DeregisterTargets, PUT members) are compared by that
// outcome, not counted (targetCall).

// targetCall reports whether a call only sets a load balancer's targets.
func targetCall(label string) bool {
	switch label {
	case "aws RegisterTargets", "aws DeregisterTargets", "os PUT members":
		return true
	}
	return false
}

// groupTargets is one target group's or pool's targets, as node names
// (a target no node of the world has is shown as itself, in brackets).
type groupTargets struct {
	group string
	nodes []string
}

// compareTargets waits (bounded) until, for every Service and every
// backend the plan gives targets, each of its target groups or pools in
// the clouds targets exactly the planned nodes, and reports those that
// do not.
func (w *world) compareTargets(rep *plan.Report) {
	w.t.Helper()
	byTarget := w.targetNames()
	for _, s := range rep.Services {
		for _, b := range slices.Sorted(maps.Keys(s.Targets)) {
			want := s.Targets[b]
			bound := waitBound
			if b == "os" {
				bound = octaviaBound
			}
			var last []groupTargets
			err := framework.WaitFor(w.ctx, bound, s.Name+" targets in "+b, func(context.Context) (bool, string, error) {
				var err error
				if last, err = w.targetsOf(s.Name, b, byTarget); err != nil {
					return false, err.Error(), nil
				}
				return sameTargets(want, last), fmt.Sprintf("%v", last), nil
			})
			if err != nil {
				w.t.Errorf("%s/%s in backend %s: the plan predicts the targets %v once the switch settled; the switch left %v", s.Namespace, s.Name, b, want, last)
			}
		}
	}
}

// sameTargets: at least one group, and each targets exactly want.
func sameTargets(want []string, got []groupTargets) bool {
	if len(got) == 0 {
		return false
	}
	for _, g := range got {
		if !slices.Equal(g.nodes, want) {
			return false
		}
	}
	return true
}

// targetsOf lists the Service's target groups (aws: those tagged for it)
// or pools (os: those of its Octavia load balancers) with their targets as
// node names; other backends have none to read.
func (w *world) targetsOf(name, backend string, byTarget map[string]string) ([]groupTargets, error) {
	var out []groupTargets
	nodeOf := func(id string) string {
		if n, ok := byTarget[id]; ok {
			return n
		}
		return "[" + id + "]"
	}
	switch backend {
	case "aws":
		for _, tg := range w.fake.TargetGroups() {
			if tg.Tags[tagService] != ns+"/"+name {
				continue
			}
			nodes := []string{}
			for _, t := range tg.Targets {
				id, _, _ := strings.Cut(t, ":")
				nodes = append(nodes, nodeOf(id))
			}
			out = append(out, groupTargets{group: tg.Name, nodes: sortedSet(nodes)})
		}
	case "os":
		if w.os == nil {
			return nil, nil
		}
		for id := range w.osLBsOf(name) {
			pages, err := pools.List(w.os.client, pools.ListOpts{LoadbalancerID: id}).AllPages(w.ctx)
			if err != nil {
				return nil, err
			}
			ps, err := pools.ExtractPools(pages)
			if err != nil {
				return nil, err
			}
			for _, p := range ps {
				pages, err := pools.ListMembers(w.os.client, p.ID, pools.ListMembersOpts{}).AllPages(w.ctx)
				if err != nil {
					return nil, err
				}
				ms, err := pools.ExtractMembers(pages)
				if err != nil {
					return nil, err
				}
				nodes := []string{}
				for _, m := range ms {
					nodes = append(nodes, nodeOf(m.Address))
				}
				out = append(out, groupTargets{group: p.Name, nodes: sortedSet(nodes)})
			}
		}
	default:
		return nil, fmt.Errorf("backend %s: the test reads no targets of it", backend)
	}
	return out, nil
}

// targetNames maps what a target is named in the clouds (instance IDs and
// addresses) to the world's nodes' names.
func (w *world) targetNames() map[string]string {
	out := map[string]string{}
	for _, n := range w.nodes {
		for _, id := range w.targetIDs(n) {
			out[id] = n.name
		}
	}
	return out
}

func sortedSet(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

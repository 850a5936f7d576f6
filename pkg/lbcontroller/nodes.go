package lbcontroller

import (
	"hash/maphash"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// nodeIncluded is upstream's stable node set (router.StableNode): a node
// is a load-balancer target unless it is being deleted, excluded by label
// or tainted for deletion by the cluster autoscaler. Readiness does not
// matter (the load balancer's health checks decide), so the set changes
// rarely.
var nodeIncluded = router.StableNode

// nodeChangeMatters reports whether a node update can change a load
// balancer's targets: its inclusion or its providerID (which chooses the
// backend that can target it). Address changes are the router's (see
// pkg/router/nodesync.go); label changes, see labelsMoveTargets.
func nodeChangeMatters(old, cur *corev1.Node) bool {
	return nodeIncluded(old) != nodeIncluded(cur) || old.Spec.ProviderID != cur.Spec.ProviderID
}

// nodeUpdated is the node informer's update handler: a change that can
// change a load balancer's targets starts a node sync (nodesChanged).
func (c *Controller) nodeUpdated(old, cur any) {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := cur.(*corev1.Node)
	if ok1 && ok2 && (nodeIncluded(o) || nodeIncluded(n)) && addressesChanged(o, n) {
		c.addrGen.Add(1)
	}
	if ok1 && ok2 && (nodeChangeMatters(o, n) || c.labelsMoveTargets(o, n)) {
		c.nodesChanged()
	}
}

// flushComing reports whether a flush of node changes is due that will
// compare every Service's targets with the nodes as they are now or later
// (a batch is open), or one is running (which may have listed the nodes
// before the caller's change: the caller's nodesChanged makes it run
// again). Either way a node change needs no question of its own about
// which Services it moves: the flush finds them.
func (c *Controller) flushComing() bool {
	if c.nodeBatch.Open() {
		return true
	}
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	return c.flushing
}

// addressesChanged reports whether a node's InternalIP or ExternalIP
// addresses changed, in any order: those a load balancer reaching the
// node by address (AWS IP targets, Octavia members) targets.
func addressesChanged(old, cur *corev1.Node) bool {
	if slices.Equal(old.Status.Addresses, cur.Status.Addresses) {
		return false // the common case (a heartbeat): no allocation.
	}
	return !slices.Equal(targetAddresses(old), targetAddresses(cur))
}

// targetAddresses are the node's InternalIP and ExternalIP addresses,
// sorted.
func targetAddresses(n *corev1.Node) []string {
	var out []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			out = append(out, string(a.Type)+"/"+a.Address)
		}
	}
	slices.Sort(out)
	return out
}

// labelsMoveTargets reports whether a change of an included node's labels
// moves it into or out of the targets of a Service the controller serves
// (or a flush that will find out is coming, see flushComing):
// a load balancer may target only the nodes carrying labels the Service
// names (AWS's service.beta.kubernetes.io/aws-load-balancer-target-node-labels),
// and the cloud's Targeter says which nodes it targets. Before, a node
// gaining or losing such a label started no node sync: the load balancer
// waited for an unrelated node change or the repair pass. Only updates
// that change the labels are asked about, and each costs one Targeter
// call per Service served with the node before and after (labels change
// rarely; heartbeats do not touch them).
func (c *Controller) labelsMoveTargets(old, cur *corev1.Node) bool {
	if _, ok := c.cloud.(Targeter); !ok || maps.Equal(old.Labels, cur.Labels) || !nodeIncluded(old) || !nodeIncluded(cur) {
		return false
	}
	// While node changes are being flushed (a churn: every node
	// registered again gets its labels in updates of its own), the
	// flush answers for every Service at once; asking per Service here
	// too cost the node handler about 0.1 s per label update at 1,000
	// Services (0.5 s at 5,000), and the handler's backlog delayed every
	// other node change (TestLabelChangeDuringAFlushAsksNothing).
	if c.flushComing() {
		return true
	}
	for _, svc := range c.servedServices() {
		if !c.targetsOf(svc, []*corev1.Node{old}).equal(c.targetsOf(svc, []*corev1.Node{cur})) {
			return true
		}
	}
	return false
}

// servedServices lists the Services the controller holds state for, as
// last synced.
func (c *Controller) servedServices() []*corev1.Service {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*corev1.Service, 0, len(c.state))
	for _, st := range c.state {
		out = append(out, st.svc)
	}
	return out
}

// Node changes are handled in batches: a batch is flushed once no node
// changed for defaultNodeBatchQuiet, and at the latest defaultNodeBatchMax
// after its first change. A churn of many nodes (deleted, registered again,
// given their providerIDs) is then a few batches, and each Service's load
// balancer is updated at most once per batch, instead of once per node
// change.
const (
	defaultNodeBatchQuiet = time.Second
	defaultNodeBatchMax   = 5 * time.Second
)

// Targeter is a Cloud that says which of the nodes handed to it a
// Service's load balancer targets (the router: the nodes the Service's
// backend can target). With it, a node change re-syncs only the Services
// whose own targets change; without it, every Service targets every node
// handed.
type Targeter interface {
	LoadBalancerTargets(svc *corev1.Service, nodes []*corev1.Node) []*corev1.Node
}

// BackendTargeter is a Targeter that says which nodes each backend
// holding a Service's load balancer targets (the router): nil when it holds
// none, and every node handed is a target. A node can move into one
// backend's targets while another backend of the Service already targets
// it (a node labelled for an NLB's aws-load-balancer-target-node-labels,
// on a Service Octavia serves too): the union of the targets does not
// change, and a comparison of the union missed the change.
type BackendTargeter interface {
	LoadBalancerTargetsByBackend(svc *corev1.Service, nodes []*corev1.Node) map[string][]*corev1.Node
}

// AddressRetargeter says whether a node's address change, from old to
// node, changes the Service's load balancer in the named backend (the
// router: the backend can target the node and reaches it by address; an
// NLB of instance targets does not). Without it every address change of
// a target counts.
type AddressRetargeter interface {
	RetargetsOnAddressChange(svc *corev1.Service, backend string, old, node *corev1.Node) bool
}

// EnsuredTargeter is a BackendTargeter that answers for the Service a
// successful EnsureLoadBalancer just served, with the nodes handed to it,
// from what that call handed each backend (the router): the answer of
// LoadBalancerTargetsByBackend for that Service and those nodes, without
// asking each backend about each node a second time (one pass over the
// nodes per backend instead of two, per Service synced: about 3 ms of CPU
// per Service created at 5,000 nodes, issue 42).
type EnsuredTargeter interface {
	LoadBalancerTargetsEnsured(dec *router.Decision, svc *corev1.Service, nodes []*corev1.Node) map[string][]*corev1.Node
}

// ensuredTargets is targetsOf(svc, nodes) after a successful
// EnsureLoadBalancer of svc with nodes whose decision is dec: the same
// targets, from what the call handed each backend when the cloud keeps
// it (EnsuredTargeter), else targetsOf's.
func (c *Controller) ensuredTargets(dec *router.Decision, svc *corev1.Service, nodes []*corev1.Node) targetLists {
	t, ok := c.cloud.(EnsuredTargeter)
	if !ok {
		return c.targetListsOf(svc, nodes)
	}
	if by := t.LoadBalancerTargetsEnsured(dec, svc, nodes); by != nil {
		return targetLists{by: by}
	}
	return targetLists{all: nodes}
}

// targetsOf is the set of nodes the Service's load balancer targets among
// nodes, and, with a BackendTargeter, which backend targets each.
func (c *Controller) targetsOf(svc *corev1.Service, nodes []*corev1.Node) nodeSet {
	return c.targetListsOf(svc, nodes).set()
}

// targetListsOf lists the nodes the Service's load balancer targets
// among nodes (see targetsOf).
func (c *Controller) targetListsOf(svc *corev1.Service, nodes []*corev1.Node) targetLists {
	if t, ok := c.cloud.(BackendTargeter); ok {
		if by := t.LoadBalancerTargetsByBackend(svc, nodes); by != nil {
			return targetLists{by: by}
		}
		return targetLists{all: nodes}
	}
	if t, ok := c.cloud.(Targeter); ok {
		return targetLists{all: t.LoadBalancerTargets(svc, nodes)}
	}
	return targetLists{all: nodes}
}

// targetLists are the nodes a Service's load balancers target among a
// list of nodes: by backend (a BackendTargeter's answer), else as one
// list. They hold the node objects as listed: the addresses the load
// balancers were handed.
type targetLists struct {
	by  map[string][]*corev1.Node
	all []*corev1.Node
}

// set is the lists' fingerprint.
func (t targetLists) set() nodeSet {
	if t.by != nil {
		return setOfByBackend(t.by)
	}
	return setOf(t.all)
}

// readdressed reports whether a node among the targets has, in the
// lister now (current), other target addresses than the copy listed, that
// its backend reaches it by (retargets; nil: every backend). A target
// since deleted, or no longer included, is no address change: the set of
// targets changed, which the fingerprint compares.
func (t targetLists) readdressed(current func(name string) *corev1.Node, retargets func(backend string, old, node *corev1.Node) bool) bool {
	changed := func(backend string, nodes []*corev1.Node) bool {
		for _, n := range nodes {
			cur := current(n.Name)
			if cur == nil || cur == n || !addressesChanged(n, cur) {
				continue
			}
			if backend == "" || retargets == nil || retargets(backend, n, cur) {
				return true
			}
		}
		return false
	}
	if t.by == nil {
		return changed("", t.all)
	}
	for backend, nodes := range t.by {
		if changed(backend, nodes) {
			return true
		}
	}
	return false
}

// retargetsOf is readdressed's question for svc: the cloud's
// AddressRetargeter, nil without one.
func (c *Controller) retargetsOf(svc *corev1.Service) func(backend string, old, node *corev1.Node) bool {
	t, ok := c.cloud.(AddressRetargeter)
	if !ok || svc == nil {
		return nil
	}
	return func(backend string, old, node *corev1.Node) bool {
		return t.RetargetsOnAddressChange(svc, backend, old, node)
	}
}

// currentNode is the lister's copy of the node, nil when it has none.
func (c *Controller) currentNode(name string) *corev1.Node {
	n, err := c.nodes.Get(name)
	if err != nil {
		return nil
	}
	return n
}

// nodesChanged counts a node change and opens a batch of node changes, or
// pushes the open one's flush back by the quiet period (never beyond its
// maximum).
func (c *Controller) nodesChanged() {
	c.nodeGen.Add(1)
	c.nodeBatch.Changed()
}

// listedAt is when a sync listed the nodes it hands the cloud: the
// counts of node changes (nodeGen) and of address changes (addrGen) seen
// before the list was taken.
type listedAt struct{ nodes, addrs uint64 }

// listTargets lists the targets (see targets) with the counts of node
// and address changes seen before the list was taken: a sync hands that
// list to the cloud and, once it recorded what it handed, calls
// requeueIfNodesChanged with them.
func (c *Controller) listTargets() ([]*corev1.Node, listedAt, error) {
	at := listedAt{nodes: c.nodeGen.Load(), addrs: c.addrGen.Load()}
	nodes, err := c.targets()
	return nodes, at, err
}

// requeueIfNodesChanged queues the Service again when a node changed
// since its sync listed the nodes (at, from listTargets). It is called
// after the sync recorded the targets it handed the cloud (handed). A
// flush that ran while the call was in flight compared the nodes with
// the targets recorded before the call: a node excluded meanwhile, back
// to what was recorded then, looked like no change, and the call then
// recorded the list it took before the exclusion, so the load balancer
// kept the node until the next repair pass (for ever with a resync
// period of 0). The queued sync compares the recorded targets with the
// nodes now and updates the load balancer only if they differ. A change
// counted after this check is flushed later, against the targets just
// recorded.
//
// A node's address that changed while the call was in flight may have
// reached the load balancer as it was (AWS IP targets, Octavia members):
// the router, told that the controller queues the Service again itself
// (router.RequeuesOnNodeChange), does not compare the addresses handed,
// and its address re-sync queues only Services whose record its
// informer has seen, which may lag the controller's own write of it
// (TestProbeAddressChangeDuringFirstEnsure, under load: the address
// never reached the NLB). When a node the call handed one of the
// Service's load balancers has other addresses now (handed.readdressed),
// the queued sync updates the load balancer with the nodes now even
// though the set of targets is the same (addrStale, retarget); the
// backend's update changes nothing if the address did reach it. The
// address change of a node none of its load balancers was handed marks
// nothing: the queued sync compares the targets (the node may have
// become one) and updates nothing when they are the same (before, any
// included node's address change during the call cost the Service an
// UpdateLoadBalancer: TestAddressChangeOfAnUntargetedNodeUpdatesNothing),
// nor does one of a node its backend reaches by providerID, not address
// (an NLB's instance targets: the router's AddressRetargeter says so;
// TestProbe59AddressChangeOfAnInstanceTargetUpdatesNothing failed before).
// The check is a lister lookup per target, made only when an address
// changed during the call.
func (c *Controller) requeueIfNodesChanged(key string, svc *corev1.Service, at listedAt, handed targetLists) {
	if c.addrGen.Load() != at.addrs {
		if handed.readdressed(c.currentNode, c.retargetsOf(svc)) {
			c.mu.Lock()
			c.addrStale[key] = true
			c.mu.Unlock()
		}
		c.queue.Add(key)
		return
	}
	if c.nodeGen.Load() != at.nodes {
		c.queue.Add(key)
	}
}

// takeAddrStale takes the Service's mark that a node's address changed
// while a call for it was in flight (requeueIfNodesChanged).
func (c *Controller) takeAddrStale(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	stale := c.addrStale[key]
	delete(c.addrStale, key)
	return stale
}

// recordTargets records ts as the targets the Service's load balancer was
// given by an update that listed the nodes at at, then queues the Service
// again if a node changed since (requeueIfNodesChanged).
func (c *Controller) recordTargets(key string, svc *corev1.Service, ts targetLists, at listedAt) {
	c.mu.Lock()
	if cur, ok := c.state[key]; ok {
		cur.nodes = ts.set()
	}
	c.mu.Unlock()
	c.requeueIfNodesChanged(key, svc, at, ts)
}

// flushNodes closes the batch and queues the Services whose targets differ
// from those their load balancer was last given (and those whose first
// sync is still under way, which may have listed the nodes before the
// batch). Each queued sync compares again and updates the load balancer
// once.
//
// The comparison costs a pass over the nodes per Service (5 million
// targeting questions at 5,000 nodes and 1,000 Services: seconds of CPU),
// so it is made outside c.mu, from a snapshot of the Services' state:
// held during it, c.mu stalled every sync and the node informer's
// handler (which asks for the Services served when a node's labels
// change) for the whole flush, about 30 s a flush in the AWS 5,000-node
// scale cell under load, and the handler's backlog grew to thousands of
// node notifications while a churn went on, so that nodes deleted and
// registered again were missing from load balancers long after
// (TestFlushDoesNotHoldTheControllerLock). A state recorded after the
// snapshot is compared by the sync that recorded it (requeueIfNodesChanged)
// or by the next flush. Flushes run one at a time (flushOne): a batch
// closing while one runs makes it run once more when it ends, instead of
// starting another beside it; two or more such batches are one more run,
// which lists the nodes after all of them.
func (c *Controller) flushNodes() {
	c.flushMu.Lock()
	if c.flushing {
		c.flushAgain = true
		c.flushMu.Unlock()
		return
	}
	c.flushing = true
	c.flushMu.Unlock()
	for {
		c.flushOne()
		c.flushMu.Lock()
		if !c.flushAgain {
			c.flushing = false
			c.flushMu.Unlock()
			return
		}
		c.flushAgain = false
		c.flushMu.Unlock()
	}
}

// flushOne is one flush (see flushNodes): the nodes listed now compared
// with each Service's recorded targets.
func (c *Controller) flushOne() {
	nodes, err := c.targets()
	if err != nil {
		return
	}
	type recorded struct {
		key   string
		svc   *corev1.Service
		nodes nodeSet
	}
	c.mu.Lock()
	var fresh []string
	check := make([]recorded, 0, len(c.state))
	for key, st := range c.state {
		if st.fresh {
			fresh = append(fresh, key)
			continue
		}
		check = append(check, recorded{key: key, svc: st.svc, nodes: st.nodes})
	}
	c.mu.Unlock()
	for _, k := range fresh {
		c.queue.Add(k)
	}
	// Each Service is queued as soon as it is found to differ: the
	// first load balancers are updated while the rest are compared.
	for _, r := range check {
		if !c.targetsOf(r.svc, nodes).equal(r.nodes) {
			c.queue.Add(r.key)
		}
	}
}

// nodeSet is the fingerprint of a set of targets (each a node's name and
// providerID): their number and two order-independent 64-bit sums of
// their hashes under two seeds. A Service keeps 24 bytes however many
// nodes its load balancer targets; a map of them per Service was
// O(nodes × Services) of memory (1.2 GiB at 5,000 nodes and 1,000
// Services, docs/scale.md). Two sets compare equal only if both sums
// agree, which for different sets happens with a probability of about
// 2^-128.
type nodeSet struct {
	n    int
	a, b uint64
}

// targetSeeds are the fingerprints' hash seeds, one pair for the process.
var targetSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func setOf(nodes []*corev1.Node) nodeSet {
	var s nodeSet
	seen := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		if seen[n.Name] {
			continue
		}
		seen[n.Name] = true
		entry := n.Name + "\x00" + n.Spec.ProviderID
		s.n++
		s.a += maphash.String(targetSeeds[0], entry)
		s.b += maphash.String(targetSeeds[1], entry)
	}
	return s
}

// setOfByBackend is the fingerprint of the targets of several backends:
// its count is that of the distinct nodes, its sums cover each backend's
// nodes under the backend's name, so that a node moving into or out of
// one backend's targets changes it even when another backend targets the
// node throughout.
func setOfByBackend(by map[string][]*corev1.Node) nodeSet {
	var s nodeSet
	names := map[string]bool{}
	for b, nodes := range by {
		seen := make(map[string]bool, len(nodes))
		for _, n := range nodes {
			if seen[n.Name] {
				continue
			}
			seen[n.Name] = true
			if !names[n.Name] {
				names[n.Name] = true
				s.n++
			}
			entry := b + "\x00" + n.Name + "\x00" + n.Spec.ProviderID
			s.a += maphash.String(targetSeeds[0], entry)
			s.b += maphash.String(targetSeeds[1], entry)
		}
	}
	return s
}

// len is the number of targets.
func (s nodeSet) len() int { return s.n }

func (s nodeSet) equal(o nodeSet) bool { return s == o }

// targets lists the nodes the load balancers target.
func (c *Controller) targets() ([]*corev1.Node, error) {
	all, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Node, 0, len(all))
	for _, n := range all {
		if nodeIncluded(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

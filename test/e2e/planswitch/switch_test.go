package planswitch

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// The switch side of the cross-cloud differential: the binary started as
// the CCM on the planned world, and every prediction checked against what
// it did.

// snapshot is the world as the plan saw it: the Services and, per
// Service, its NLBs' DNS names in the fake and its Octavia load
// balancers' VIPs by ID.
type snapshot struct {
	svcs map[string]*corev1.Service
	nlbs map[string][]string
	osLB map[string]map[string]string
}

func (w *world) snapshot() snapshot {
	w.t.Helper()
	list, err := w.cp.Client.CoreV1().Services(ns).List(w.ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	s := snapshot{svcs: map[string]*corev1.Service{}, nlbs: map[string][]string{}, osLB: map[string]map[string]string{}}
	for i := range list.Items {
		name := list.Items[i].Name
		s.svcs[name] = &list.Items[i]
		s.nlbs[name] = w.nlbsOf(name)
		s.osLB[name] = w.osLBsOf(name)
	}
	return s
}

// osLBsOf lists the Octavia load balancers tagged for the Service, by ID
// with their VIP (none in a world without OpenStack).
func (w *world) osLBsOf(name string) map[string]string {
	if w.os == nil {
		return nil
	}
	lbs, err := w.os.lbsOf(w.ctx, w.clusterID, name)
	if err != nil {
		w.t.Fatal(err)
	}
	return lbs
}

// osVIPs are the addresses of the world's Octavia load balancers, as seen
// in snapshot s and now: their VIPs and the floating IPs of the world's
// external network (the strangers' aside).
func (w *world) osVIPs(s snapshot) map[string]bool {
	out := map[string]bool{}
	for _, lbs := range s.osLB {
		for _, vip := range lbs {
			out[vip] = true
		}
	}
	for _, vip := range w.osLBsOf("") {
		out[vip] = true
	}
	if w.os != nil {
		fips, err := w.os.floatingIPs(w.ctx)
		if err != nil {
			w.t.Fatal(err)
		}
		for addr := range fips {
			out[addr] = !slices.ContainsFunc(w.os.tp.strangers, func(f floatingips.FloatingIP) bool { return f.FloatingIP == addr })
		}
	}
	return out
}

// verdict is what the switch did that makes a plan fail, and the
// automatically assigned bare-metal addresses planned and given (compared
// as sets: the CCM syncs several Services at once and the allocator hands
// addresses out in the order it is asked).
type verdict struct {
	disruptive    []string
	planned, got  []string
	goneWhenReady []string
}

// switchAndCompare starts the switch (default metal) on the world the
// plan rep (exit status code) saw and checks every prediction: per Node,
// per Service, the AWS mutating calls one for one, and the exit status
// against whether the switch deleted, replaced or refused something.
func (w *world) switchAndCompare(rep *plan.Report, code int) {
	w.t.Helper()
	before := w.snapshot()
	w.vips = w.osVIPs(before)
	fipsBefore := w.osFloatingIPs()
	start := time.Now()
	w.startCCM("switch", false)
	w.t.Logf("switch started in %v", time.Since(start))
	var v verdict
	for _, n := range rep.Nodes {
		w.waitNode(n, &v)
	}
	for _, s := range rep.Services {
		w.waitService(s, before, &v)
	}
	for _, n := range rep.Nodes {
		w.leftAlone(n)
	}
	for _, s := range rep.Services {
		w.keptElsewhere(s, before)
	}
	w.compareAutoAddresses(v.planned, v.got)
	w.compareCalls(rep)
	w.compareTargets(rep)
	w.strangersKept()
	w.floatingIPsAsPlanned(rep, fipsBefore)
	w.t.Logf("calls and targets compared at %v; the first AWS node %v old then (the aws backend's grace for new nodes: 2m)", time.Since(start), time.Since(w.firstAWSNode).Round(time.Second))
	// A node gone but Ready is deleted the first time it is not Ready: the
	// plan counts it, so check that the switch does it.
	for _, name := range v.goneWhenReady {
		if err := framework.SetNodeReady(w.ctx, w.cp.Client, name, corev1.ConditionFalse); err != nil {
			w.t.Fatal(err)
		}
		w.eventually("node "+name+" (gone, Ready) deleted once NotReady", framework.NodeGone(w.cp.Client, name))
		v.disruptive = append(v.disruptive, "node "+name+" deleted once NotReady")
	}
	w.t.Logf("gone nodes done at %v", time.Since(start))
	if (code == 1) != (len(v.disruptive) > 0) || (code != 0 && code != 1) {
		w.t.Errorf("plan exit status %d (%s); the switch %s", code, rep.Summary, describe(v.disruptive))
	}
	w.t.Logf("plan (exit %d): %s; the switch: %s", code, rep.Summary, describe(v.disruptive))
}

// compareAutoAddresses compares the automatically assigned bare-metal
// addresses planned with those the switch gave, as sets.
func (w *world) compareAutoAddresses(planned, got []string) {
	w.t.Helper()
	slices.Sort(planned)
	slices.Sort(got)
	if slices.Equal(planned, got) {
		return
	}
	w.t.Errorf("automatically assigned bare-metal addresses: planned %v, the switch gave %v", planned, got)
}

// waitBound bounds each wait for the switch: it does each thing in about
// 2 s here; a disagreement's wait should not outlast the aws backend's
// 2-minute grace for new nodes (after it a node the plan rightly refused
// is deleted, and the checks that follow would see that).
const waitBound = 30 * time.Second

// eventually waits until cond holds, or fails the test and goes on: one
// disagreement does not hide the others.
func (w *world) eventually(what string, cond framework.Condition) {
	w.t.Helper()
	w.eventuallyWithin(waitBound, what, cond)
}

// octaviaBound bounds the wait for a load balancer the switch makes, or
// deletes, in Octavia: it converges one change per sync, each waiting for Octavia to
// apply the last (about 2 s each here, when the machine is idle; at load
// 20 a world's history took 90 s). Only a bound: worlds with Octavia hold
// no node whose outcome a longer wait changes (clockBound).
const octaviaBound = 3 * time.Minute

func (w *world) eventuallyWithin(bound time.Duration, what string, cond framework.Condition) {
	w.t.Helper()
	if err := framework.WaitFor(w.ctx, bound, what, cond); err != nil {
		w.t.Error(err)
	}
}

// waitNode waits until the switch did to the node what the plan said, for
// the outcomes that make it act.
func (w *world) waitNode(n plan.NodePlan, v *verdict) {
	w.t.Helper()
	c := w.cp.Client
	switch n.Outcome {
	case plan.NodeClaimed:
		providerID := n.ProviderID
		if n.NewProviderID != "" {
			providerID = n.NewProviderID
		}
		tainted := w.tainted[n.Name]
		w.eventually("node "+n.Name+" served by "+n.Backend, framework.NodeMatches(c, n.Name, func(node *corev1.Node) (bool, string) {
			label := node.Labels[string(annotation.NodeBackend)]
			ok := node.Spec.ProviderID == providerID && !framework.HasTaint(node, framework.UninitializedTaint) &&
				(label == n.Backend || (!tainted && label == "")) &&
				framework.HasTaint(node, shutdownTaint) == n.Shutdown
			return ok, fmt.Sprintf("providerID %q (planned %q), labels %v, taints %v (shutdown planned %v)", node.Spec.ProviderID, providerID, node.Labels, node.Spec.Taints, n.Shutdown)
		}))
	case plan.NodeDeleted:
		w.eventually("node "+n.Name+" deleted", framework.NodeGone(c, n.Name))
		v.disruptive = append(v.disruptive, "node "+n.Name+" deleted")
	case plan.NodeGoneReady:
		v.goneWhenReady = append(v.goneWhenReady, n.Name)
	case plan.NodeError:
		v.disruptive = append(v.disruptive, "node "+n.Name+" refused")
	case plan.NodeOtherCCM:
	default:
		w.t.Errorf("node %s: outcome %q not expected in this world (%s)", n.Name, n.Outcome, n.Error)
	}
}

const shutdownTaint = "node.cloudprovider.kubernetes.io/shutdown"

// leftAlone checks, once the switch served the rest (its controllers have
// run), the nodes the plan says it leaves as they are: another CCM's and
// refused ones stay tainted and unlabelled, and no node is deleted
// unplanned.
func (w *world) leftAlone(n plan.NodePlan) {
	w.t.Helper()
	if n.Outcome == plan.NodeDeleted {
		return
	}
	node, err := w.cp.Client.CoreV1().Nodes().Get(w.ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		w.t.Errorf("node %s (planned %s): %v", n.Name, n.Outcome, err)
		return
	}
	if n.Outcome != plan.NodeOtherCCM && n.Outcome != plan.NodeError {
		return
	}
	if w.tainted[n.Name] && (!framework.HasTaint(node, framework.UninitializedTaint) || node.Labels[string(annotation.NodeBackend)] != "") {
		w.t.Errorf("node %s (planned %s: %s%s): labels %v, taints %v, providerID %q", n.Name, n.Outcome, n.Platform, n.Error, node.Labels, node.Spec.Taints, node.Spec.ProviderID)
	}
}

// waitService waits until the switch did to the Service what the plan
// said: its addresses, its refusal, its deletes and drains.
func (w *world) waitService(s plan.ServicePlan, before snapshot, v *verdict) {
	w.t.Helper()
	name := s.Namespace + "/" + s.Name
	switch s.Outcome {
	case plan.LBAdopted, plan.LBCreated, plan.LBReplaced:
		got := w.waitAddresses(s, before, true, v)
		// Addresses of the backends the Service leaves go (a drained
		// bare-metal one after the drain), and those of the backends
		// leaving it to another controller or forgetting it (their load
		// balancers kept).
		leaving := slices.Concat(s.DeletedFrom, s.DrainedFrom, s.HandedOver, s.Forgotten)
		old := w.without(ingresses(before.svcs[s.Name].Status.LoadBalancer), leaving)
		kept := keeps(old, got)
		switch {
		case s.Outcome == plan.LBAdopted && !kept:
			w.t.Errorf("%s planned adopted: the switch changed its addresses %v to %v", name, old, got)
		case s.Outcome == plan.LBReplaced && kept:
			w.t.Errorf("%s planned REPLACED: the switch kept its addresses %v (now %v)", name, old, got)
		case s.Outcome == plan.LBReplaced:
			v.disruptive = append(v.disruptive, fmt.Sprintf("%s replaced (%v -> %v)", name, old, got))
		}
	case plan.LBRefused:
		// Refused by some of its backends, served by the others: their
		// addresses are shown (the sync fails, so nothing marks it
		// served), the refusing backends' own taken out; with nothing
		// shown, its status stays as it was (NewAddress is Address).
		if s.NewAddress != "" || s.Address != "" {
			w.waitAddresses(s, before, false, v)
		}
		w.eventually(name+" refused with the plan's error", w.refusedWith(s))
		v.disruptive = append(v.disruptive, name+" refused")
	case plan.LBElsewhere:
	default:
		w.t.Errorf("%s: outcome %q not expected in this world (%s)", name, s.Outcome, s.Error)
	}
	for _, b := range s.DeletedFrom {
		bound := waitBound
		if b == "os" {
			bound = octaviaBound // Octavia deletes at its pace (see waitAddresses)
		}
		w.eventuallyWithin(bound, name+" deleted from "+b, w.heldIn(s.Name, b, false))
		v.disruptive = append(v.disruptive, name+" deleted from "+b)
	}
	for _, b := range s.DrainedFrom {
		w.eventually(name+" draining in "+b, framework.ServiceMatches(w.cp.Client, ns, s.Name, func(svc *corev1.Service) (bool, string) {
			d := svc.Annotations[string(annotation.LoadBalancerDraining)]
			return strings.Contains(d, b), fmt.Sprintf("draining %q", d)
		}))
		if ok, why, _ := w.heldIn(s.Name, b, true)(w.ctx); !ok {
			w.t.Errorf("%s draining in %s: its load balancer there is gone before the drain's end (%s)", name, b, why)
		}
		v.disruptive = append(v.disruptive, name+" drained from "+b)
	}
}

// heldIn holds when backend b holds (or, with want false, no longer
// holds) a load balancer of the Service: an NLB tagged for it in the
// fake, an Octavia load balancer tagged for it; for bare metal, the router's record naming metal (it drops a
// backend once its delete succeeded: the addresses released).
func (w *world) heldIn(name, b string, want bool) framework.Condition {
	return func(ctx context.Context) (bool, string, error) {
		switch b {
		case "aws":
			nlbs := w.nlbsOf(name)
			return (len(nlbs) > 0) == want, fmt.Sprintf("NLBs %v", nlbs), nil
		case "os":
			lbs := w.osLBsOf(name)
			return (len(lbs) > 0) == want, fmt.Sprintf("Octavia load balancers %v", lbs), nil
		}
		svc, err := w.cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		rec := svc.Annotations[string(annotation.LoadBalancerBackends)]
		return slices.Contains(strings.Split(rec, ","), b) == want, fmt.Sprintf("record %q", rec), nil
	}
}

// waitAddresses waits until the switch marked the Service served by the
// planned backends (with marked; a Service refused by some of its
// backends is not) with addresses as planned, position by position: the
// same address, or, where the plan gave a new NLB a made-up DNS name, a
// real NLB's name the Service did not have (for a new Octavia load
// balancer, an address it did not have), or, where the plan gave a
// bare-metal address, one of the pool (those collected in v to compare as
// sets).
func (w *world) waitAddresses(s plan.ServicePlan, before snapshot, marked bool, v *verdict) []string {
	w.t.Helper()
	old := ingresses(before.svcs[s.Name].Status.LoadBalancer)
	// A bare-metal address drained stays in the status until the drain's
	// end: compared apart from the addresses served.
	draining := w.without(old, slices.DeleteFunc(slices.Clone(s.DrainedFrom), func(b string) bool { return b != "metal" }))
	draining = difference(old, draining)
	planned := difference(split(s.NewAddress), draining)
	var got []string
	// A Service leaving Octavia waits for its load balancer there to be
	// deleted (or drained) before its status shows only the new backend:
	// Octavia's bound too (seed 1796402058196049806, beside a CPU burner:
	// s2's move from os to metal waited 30 s for Octavia's delete).
	bound := waitBound
	if slices.Contains(split(s.Backend), "os") || slices.Contains(s.DeletedFrom, "os") || slices.Contains(s.DrainedFrom, "os") {
		bound = octaviaBound
	}
	w.eventuallyWithin(bound, s.Namespace+"/"+s.Name+" served as planned ("+s.Outcome+" by "+s.Backend+", "+s.NewAddress+")", framework.ServiceMatches(w.cp.Client, ns, s.Name, func(svc *corev1.Service) (bool, string) {
		got = difference(ingresses(svc.Status.LoadBalancer), draining)
		served := svc.Annotations[string(annotation.LoadBalancerServedBy)]
		ok := (!marked || served == s.Backend) && len(got) == len(planned)
		for i := 0; ok && i < len(got); i++ {
			ok = w.sameAddress(planned[i], got[i], old)
		}
		return ok, fmt.Sprintf("status %v, served-by %q", got, served)
	}))
	for i := range min(len(got), len(planned)) {
		if w.inPool(planned[i]) && !slices.Contains(old, planned[i]) {
			v.planned, v.got = append(v.planned, planned[i]), append(v.got, got[i])
		}
	}
	return got
}

// without drops from addrs those of the backends bs: NLB names for aws,
// pool addresses for metal, Octavia VIPs for os.
func (w *world) without(addrs, bs []string) []string {
	return slices.DeleteFunc(slices.Clone(addrs), func(a string) bool {
		return (isNLB(a) && slices.Contains(bs, "aws")) || (w.inPool(a) && slices.Contains(bs, "metal")) || (w.vips[a] && slices.Contains(bs, "os"))
	})
}

// difference is a without the elements of b, in a's order.
func difference(a, b []string) []string {
	return slices.DeleteFunc(slices.Clone(a), func(x string) bool { return slices.Contains(b, x) })
}

// sameAddress compares one planned address with one the switch gave.
func (w *world) sameAddress(planned, got string, old []string) bool {
	switch {
	case planned == got:
		return true
	case strings.HasSuffix(planned, ".new-address.dry-run.invalid"):
		// A new Octavia load balancer's: its VIP.
		return !isNLB(got) && !w.inPool(got) && !slices.Contains(old, got)
	case strings.Contains(planned, "dry-run"):
		return isNLB(got) && !strings.Contains(got, "dry-run") && !slices.Contains(old, got)
	}
	return w.inPool(planned) && w.inPool(got)
}

func isNLB(addr string) bool { return strings.Contains(addr, ".elb.") }

func (w *world) inPool(addr string) bool {
	ip, err := netip.ParseAddr(addr)
	return err == nil && netip.MustParsePrefix(w.pool).Contains(ip)
}

// keptMeanwhile starts what a plan's error says of the load balancers
// kept while a Service is refused (pkg/plan).
const keptMeanwhile = "; updating the load balancers kept meanwhile: "

// refusedWith holds once a Warning event on the Service carries the
// plan's error (the router's "service ns/name: " prefix aside).
func (w *world) refusedWith(s plan.ServicePlan) framework.Condition {
	want := s.Error
	if _, after, ok := strings.Cut(want, s.Namespace+"/"+s.Name+": "); ok {
		want = after
	}
	// What the plan adds after the refusal is how the load balancers kept
	// meanwhile would take the next node sync (bare metal's update checks
	// the Service's request too): no sync of the switch's first minutes
	// need make it, and its Warning, if made, is another.
	want, _, _ = strings.Cut(want, keptMeanwhile)
	return func(ctx context.Context) (bool, string, error) {
		evs, err := framework.Events(ctx, w.cp.Client, "Service", ns, s.Name)
		if err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, e := range evs {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, want) {
				return true, "", nil
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, fmt.Sprintf("want a Warning with %q; events %q", want, seen), nil
	}
}

// keptElsewhere checks, once the switch served the rest, what the plan
// says it leaves: a Service not ours keeps its status and annotations
// (its deletes aside), and no Service loses an NLB the plan does not
// delete or replace.
func (w *world) keptElsewhere(s plan.ServicePlan, before snapshot) {
	w.t.Helper()
	name := s.Namespace + "/" + s.Name
	was := before.svcs[s.Name]
	if s.Outcome == plan.LBElsewhere && len(s.DeletedFrom) == 0 {
		svc, err := w.cp.Client.CoreV1().Services(ns).Get(w.ctx, s.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			w.t.Errorf("%s (not ours): %v", name, err)
		case !slices.Equal(ingresses(svc.Status.LoadBalancer), ingresses(was.Status.LoadBalancer)):
			w.t.Errorf("%s (not ours): status %v, was %v", name, ingresses(svc.Status.LoadBalancer), ingresses(was.Status.LoadBalancer))
		case svc.Annotations[string(annotation.LoadBalancerServedBy)] != was.Annotations[string(annotation.LoadBalancerServedBy)]:
			w.t.Errorf("%s (not ours): served-by %q, was %q", name, svc.Annotations[string(annotation.LoadBalancerServedBy)], was.Annotations[string(annotation.LoadBalancerServedBy)])
		}
	}
	if s.Outcome == plan.LBReplaced {
		return
	}
	// A Service refused by one backend may have its NLB replaced by
	// another: the plan lists that delete.
	if !slices.Contains(s.DeletedFrom, "aws") && !slices.ContainsFunc(s.Changes, func(in backends.Intent) bool { return strings.HasSuffix(in.Call, ":DeleteLoadBalancer") }) {
		now := w.nlbsOf(s.Name)
		for _, dns := range before.nlbs[s.Name] {
			if !slices.Contains(now, dns) {
				w.t.Errorf("%s (planned %s, deleting from %v): the switch deleted its NLB %s", name, s.Outcome, s.DeletedFrom, dns)
			}
		}
	}
	if !slices.Contains(s.DeletedFrom, "os") {
		now := w.osLBsOf(s.Name)
		for id := range before.osLB[s.Name] {
			if _, ok := now[id]; !ok {
				w.t.Errorf("%s (planned %s, deleting from %v): the switch deleted its Octavia load balancer %s", name, s.Outcome, s.DeletedFrom, id)
			}
		}
	}
}

// compareCalls waits until the clouds have seen no mutating call for a
// while (bounded), then compares, Service by Service, the switch's
// mutating AWS and Octavia calls with the plan's, one for one (as
// multisets of actions: the CCM syncs Services concurrently; drains come
// after the drain period and are not calls). The calls that only set
// targets are left to compareTargets: how many the switch makes depends
// on whether its first sync runs before or after the nodes change; where
// they end does not.
func (w *world) compareCalls(rep *plan.Report) {
	w.t.Helper()
	planned := map[string][]string{}
	for _, s := range rep.Services {
		key := s.Namespace + "/" + s.Name
		for _, in := range slices.Concat(s.Adoption, s.Changes) {
			svc, action, ok := strings.Cut(in.Call, ":")
			var labels []string
			switch {
			case ok && (svc == "ec2" || svc == "elasticloadbalancing"):
				labels = []string{"aws " + action}
			default:
				for _, l := range osLabels(in) {
					labels = append(labels, "os "+l)
				}
			}
			for _, l := range labels {
				if !targetCall(l) {
					planned[key] = append(planned[key], l)
				}
			}
		}
	}
	made := map[string][]cloudCall{}
	for _, c := range w.quietCalls() {
		if !targetCall(c.label) {
			made[c.service] = append(made[c.service], c)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(mergeKeys(planned, made))) {
		notMade, notPlanned := match(planned[key], made[key])
		var unplanned []string
		for _, c := range notPlanned {
			unplanned = append(unplanned, c.label+fmt.Sprint(c.targets))
		}
		if key == "" && len(unplanned) > 0 {
			w.t.Errorf("mutating cloud calls naming no Service: %v", unplanned)
		} else if len(notMade) > 0 || len(unplanned) > 0 {
			w.t.Errorf("%s: mutating cloud calls planned but not made %v; made but not planned %v (planned %v)", key, notMade, unplanned, planned[key])
		}
	}
}

// cloudCall is one mutating call of the switch: "aws ACTION" or "os
// METHOD collection", the Service it is for, and the targets it names
// (RegisterTargets, DeregisterTargets: their IDs; PUT members: the
// members' addresses).
type cloudCall struct {
	label, service string
	targets        []string
}

// metalIPs are the bare-metal inventory's addresses.
var metalIPs = map[string]string{"bm-1": "10.0.0.11", "bm-2": "10.0.0.12", "bm-3": "10.0.0.13", "gone-1": "10.0.0.14"}

// targetIDs are what a load balancer's target for the node is named: its
// instance ID and private address (aws), its guest address (vsphere), its
// inventory address (metal).
func (w *world) targetIDs(n nodeCase) []string {
	switch n.cloud {
	case "aws":
		in := w.seeded.Instances[n.index]
		return append([]string{in.ID}, in.PrivateIPs...)
	case "vsphere":
		return []string{w.vms[n.index].IP}
	case "metal":
		if ip := metalIPs[n.name]; ip != "" {
			return []string{ip}
		}
	}
	return nil
}

// match pairs made calls with planned actions in the order they were
// made, and returns the planned actions not made and the calls not
// planned.
func match(planned []string, made []cloudCall) (notMade []string, notPlanned []cloudCall) {
	left := slices.Clone(planned)
	for _, c := range made {
		if i := slices.Index(left, c.label); i >= 0 {
			left = slices.Delete(left, i, i+1)
			continue
		}
		notPlanned = append(notPlanned, c)
	}
	slices.Sort(left)
	return left, notPlanned
}

func mergeKeys(a map[string][]string, b map[string][]cloudCall) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// quietFor is how long the clouds must see no new mutating call before
// the switch's calls are compared (the CCM's controllers re-run every
// second or few seconds).
const quietFor = 4 * time.Second

// quietCalls waits until the clouds have seen no new mutating call for
// quietFor and, in a world with Octavia, until Octavia reports every load
// balancer of the world done (none PENDING_*: the backend retries a change
// every 2 s while one is pending, so calls stopping then would not mean
// the switch is done, however long they stopped), and returns the calls
// recorded. Bounded by octaviaBound with Octavia (it applies each change
// before the next is asked for), else waitBound.
func (w *world) quietCalls() []cloudCall {
	w.t.Helper()
	n, since := -1, time.Now()
	bound := waitBound
	if w.os != nil {
		bound = octaviaBound
	}
	var calls []cloudCall
	err := framework.WaitFor(w.ctx, bound, "no new mutating cloud call for "+quietFor.String()+" and no Octavia load balancer pending", func(ctx context.Context) (bool, string, error) {
		calls = w.cloudCalls()
		if len(calls) != n {
			n, since = len(calls), time.Now()
		}
		pending, err := w.octaviaPending(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		if len(pending) > 0 {
			since = time.Now()
		}
		return time.Since(since) >= quietFor, fmt.Sprintf("%d calls, Octavia load balancers pending %v", n, pending), nil
	})
	if err != nil {
		w.t.Error(err)
	}
	return calls
}

// octaviaPending lists the world's Octavia load balancers whose
// provisioning status is PENDING_* (none without Octavia).
func (w *world) octaviaPending(ctx context.Context) ([]string, error) {
	if w.os == nil {
		return nil, nil
	}
	pages, err := loadbalancers.List(w.os.client, loadbalancers.ListOpts{Tags: []string{"mccm-cluster=" + w.clusterID}}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	lbs, err := loadbalancers.ExtractLoadBalancers(pages)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, lb := range lbs {
		if strings.HasPrefix(lb.ProvisioningStatus, "PENDING_") {
			out = append(out, lb.Name+" "+lb.ProvisioningStatus)
		}
	}
	return out, nil
}

// cloudCalls are the mutating calls the AWS fake and Octavia recorded.
func (w *world) cloudCalls() []cloudCall {
	var out []cloudCall
	for _, c := range w.rec.Calls() {
		out = append(out, cloudCall{label: "aws " + c.action, service: c.service, targets: c.targets})
	}
	if w.os != nil {
		for _, c := range slices.Concat(w.os.rec.Calls(), w.os.neutron.Calls()) {
			out = append(out, cloudCall{label: "os " + c.label, service: c.service, targets: c.members})
		}
	}
	return out
}

// ingresses lists a status's addresses, IPs and hostnames, in order.
func ingresses(st corev1.LoadBalancerStatus) []string {
	var out []string
	for _, in := range st.Ingress {
		out = append(out, in.IP+in.Hostname)
	}
	return out
}

// keeps reports whether every address of old is in now.
func keeps(old, now []string) bool {
	for _, a := range old {
		if !slices.Contains(now, a) {
			return false
		}
	}
	return true
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

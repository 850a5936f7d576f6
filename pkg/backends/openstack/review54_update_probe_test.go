package openstack

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestReview54UpdateIgnoresAnnotationsItDoesNotUse (review probe of
// s54-osupdate): the members-only UpdateLoadBalancer reads only the nodes
// and the node selector of the Service's spec, yet it still parses and
// validates every OpenStack annotation (parseOptions). A Service that
// moves to bare metal and, valid there, gains a UDP port while it keeps
// loadbalancer.openstack.org/proxy-protocol (or X-Forwarded-For, which
// OpenStack allows on TCP ports only) cannot have the members of its
// draining or kept Octavia load balancer updated: the update fails with
// an annotation error about a listener it will never make, and the
// router's retargetDraining fails the Service's whole sync for it (drain.go:
// "One failing fails the sync"). The update should set the TCP:80 pool's
// members, as it does for a valid spec.
func TestReview54UpdateIgnoresAnnotationsItDoesNotUse(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	n1, n2 := newNode("n1", withInternalIP("10.4.11.1")), newNode("n2", withInternalIP("10.4.11.2"))
	svc := newService("moved")
	t.Cleanup(func() { deleteConverged(t, c.lb, svc) })
	ensureConverged(t, c.lb, svc, []*corev1.Node{n1})
	before := lbShape(t, c, svc)

	moved := svc.DeepCopy()
	moved.Annotations[string(AnnotationProxyProtocol)] = "true" // for metal's own proxy; OpenStack: TCP ports only
	withPort(corev1.ProtocolUDP, 53, 30053)(moved)

	deadline := 60
	var err error
	for i := 0; i < deadline; i++ {
		err = c.lb.UpdateLoadBalancer(context.Background(), "kubernetes", moved.DeepCopy(), []*corev1.Node{n1, n2})
		if err == nil || !isRetry(err) {
			break
		}
		waitRetry(c)
	}
	if err != nil {
		t.Errorf("UpdateLoadBalancer of a Service whose OpenStack annotations no longer fit its new spec: %v; want the members updated (the update uses none of them)", err)
	}
	want := before
	want.members = "n1 10.4.11.1:30080 monitor 0; n2 10.4.11.2:30080 monitor 0"
	if got := lbShape(t, c, svc); got != want {
		t.Errorf("after the update:\n  %+v\nwant only the members changed:\n  %+v", got, want)
	}
}

// TestReview54EnsureAndUpdateAgreeOnMembers (review probe): the members
// Update makes are those Ensure wants for the same Service and nodes, or
// the two fight on every node change (Update sets them, the next Ensure or
// repair pass sets them back). A Service with externalTrafficPolicy Local
// (HTTP monitor, members with a monitor port) and two ports (two pools):
// after Ensure converged, the dry run of an update with new nodes (one
// added, one whose InternalIP changed) lists one member change per pool,
// the real update makes exactly as many mutating calls, and then neither
// Ensure nor Update makes any.
func TestReview54EnsureAndUpdateAgreeOnMembers(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	ctx := context.Background()
	n1, n2 := newNode("n1", withInternalIP("10.4.12.1")), newNode("n2", withInternalIP("10.4.12.2"))
	svc := newService("agree", withLocalTraffic(32111), withPort(corev1.ProtocolTCP, 8443, 30443))
	t.Cleanup(func() { deleteConverged(t, c.lb, svc) })
	ensureConverged(t, c.lb, svc, []*corev1.Node{n1, n2})

	n2b := newNode("n2", withInternalIP("10.4.12.22")) // its address changed
	n3 := newNode("n3", withInternalIP("10.4.12.3"))
	nodes := []*corev1.Node{n1, n2b, n3}
	dctx, intents := backends.WithDryRun(ctx)
	if err := c.lb.UpdateLoadBalancer(dctx, "kubernetes", svc.DeepCopy(), nodes); err != nil {
		t.Fatalf("dry-run update: %v", err)
	}
	planned := len(intents())
	for _, in := range intents() {
		t.Logf("planned: %s: %s", in.Call, in.What)
	}
	_, w0 := apiCalls(t, c)
	updateConverged(t, c.lb, svc, nodes)
	_, w1 := apiCalls(t, c)
	if planned != 2 || int(w1-w0) != planned {
		t.Errorf("update with new nodes: planned %d member changes, made %v mutating calls; want 2 and 2", planned, w1-w0)
	}
	shape := lbShape(t, c, svc)
	t.Logf("members after the update: %s", shape.members)
	ensureConverged(t, c.lb, svc, nodes)
	_, w2 := apiCalls(t, c)
	if w2 != w1 {
		t.Errorf("Ensure after the update made %v mutating calls, want none (Update's members are not Ensure's): members now %s, were %s", w2-w1, lbShape(t, c, svc).members, shape.members)
	}
	updateConverged(t, c.lb, svc, nodes)
	if _, w3 := apiCalls(t, c); w3 != w2 {
		t.Errorf("Update after Ensure made %v mutating calls, want none", w3-w2)
	}
}

// waitRetry sleeps the backend's retry delay.
func waitRetry(c *Cloud) {
	time.Sleep(c.lb.retryDelay)
}

// TestReview54UpdateFailingHalfWay (review probe): a two-pool member
// update whose second batch update fails, never sent (a connection that
// could not be made) or sent with its answer lost, is an error that is
// not a retry nor a user error; the update called again converges both
// pools, with one batch update per pool in all (the lost answer's call
// landed: it is not made again). Both cases side by side, beside the
// other tests: each has its own backend, fault transport (its counts are
// its own client's) and Service.
func TestReview54UpdateFailingHalfWay(t *testing.T) {
	t.Parallel()
	if !haveRealOctavia() {
		realOctavia(t)
	}
	for _, lose := range []bool{false, true} {
		t.Run(map[bool]string{false: "never sent", true: "answer lost"}[lose], func(t *testing.T) {
			t.Parallel()
			c := newConformance(t, true)
			lb := c.cloud.lb
			n1, n2 := newNode("n1", withInternalIP("10.4.13.1")), newNode("n2", withInternalIP("10.4.13.2"))
			svc := newService("half"+randomID(t)[:4], withPort(corev1.ProtocolTCP, 8443, 30443))
			t.Cleanup(func() { deleteConverged(t, lb, svc) })
			ensureConverged(t, lb, svc, []*corev1.Node{n1})
			nodes := []*corev1.Node{n1, n2}
			m0 := c.fault.Mutations()
			restore := c.fault.failAfter(1, lose)
			var failed error
			for i := 0; i < 200 && failed == nil; i++ {
				err := lb.UpdateLoadBalancer(context.Background(), "kubernetes", svc.DeepCopy(), nodes)
				switch {
				case err == nil:
					t.Fatalf("the update converged with its second batch update failing")
				case isRetry(err) || sqliteLocked(err):
					time.Sleep(lb.retryDelay)
				default:
					failed = err
				}
			}
			restore()
			if failed == nil {
				t.Fatal("the second batch update never failed")
			}
			if _, ok := backends.AsUserError(failed); ok {
				t.Errorf("a failed member update is a user error: %v", failed)
			}
			t.Logf("the failing call: %v", failed)
			updateConverged(t, lb, svc, nodes)
			if got, want := lbShape(t, c.cloud, svc).members, "n1 10.4.13.1:30080 monitor 0; n1 10.4.13.1:30443 monitor 0; n2 10.4.13.2:30080 monitor 0; n2 10.4.13.2:30443 monitor 0"; got != want {
				t.Errorf("members after the update: %q, want %q", got, want)
			}
			// The fault transport counts the call whose answer it lost as
			// failed, though it landed: it must not be made again.
			want := map[bool]int{false: 2, true: 1}[lose]
			if n := c.fault.Mutations() - m0; n != want {
				t.Errorf("%d mutating calls passed after the fault, want %d (one batch update per pool)", n, want)
			}
		})
	}
}

// TestReview54UpdateOfPoolInErrorIsNoSuccess (review probe): a pool a
// failed change left in ERROR, then a node change. The members-only
// update skips the pool and answers nil: success, though the pool's
// members are not the nodes given. pkg/lbcontroller's retarget then
// records those nodes as handed (recordTargets) and calls no update again
// for them, and it does not fall back to a full sync as upstream's node
// sync does on a failed update (its failed Services go to the service
// queue, an EnsureLoadBalancer): the pool keeps its ERROR and stale
// members until the next repair pass (never with repairs off). Before the
// members-only update, the update (a whole ensure) replaced the pool with
// the nodes as members. A load balancer in ERROR is an error (update);
// a pool in ERROR should be too, or be replaced by the update.
func TestReview54UpdateOfPoolInErrorIsNoSuccess(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	n1, n2 := newNode("n1", withInternalIP("10.4.14.1")), newNode("n2", withInternalIP("10.4.14.2"))
	svc := newService("pool-err")
	t.Cleanup(func() { deleteConverged(t, c.lb, svc) })
	ensureConverged(t, c.lb, svc, []*corev1.Node{n1})
	ctx := context.Background()
	sc, err := c.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := readState(ctx, sc.loadBalancer, theLB(t, c, svc).ID)
	if err != nil || len(st.pools) != 1 {
		t.Fatalf("state %+v, %v: want one pool", st, err)
	}
	for id := range st.pools {
		setError(t, "pool", id)
	}
	nodes := []*corev1.Node{n1, n2}
	var uerr error
	for i := 0; i < 200; i++ {
		uerr = c.lb.UpdateLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes)
		if uerr == nil || (!isRetry(uerr) && !sqliteLocked(uerr)) {
			break
		}
		time.Sleep(c.lb.retryDelay)
	}
	members := lbShape(t, c, svc).members
	if want := "n1 10.4.14.1:30080 monitor 0; n2 10.4.14.2:30080 monitor 0"; uerr == nil && members != want {
		t.Errorf("UpdateLoadBalancer with a pool in ERROR answered success, members %q; want an error or the members %q", members, want)
	}
	t.Logf("update: %v; members %q", uerr, members)
}

// TestReview54ConvergedUpdateReads (review probe, the docs' claim): with
// nothing changed, the members-only update makes no mutating call and at
// most the 4 reads docs/openstack.md gives for Ensure and Update of a
// one-port load balancer.
func TestReview54ConvergedUpdateReads(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.4.15.1")), newNode("n2", withInternalIP("10.4.15.2"))}
	svc := newService("reads-upd")
	t.Cleanup(func() { deleteConverged(t, c.lb, svc) })
	ensureConverged(t, c.lb, svc, nodes)
	r0, w0 := apiCalls(t, c)
	if err := c.lb.UpdateLoadBalancer(context.Background(), "kubernetes", svc.DeepCopy(), nodes); err != nil {
		t.Fatal(err)
	}
	if r1, w1 := apiCalls(t, c); r1-r0 > 4 || w1 != w0 {
		t.Errorf("converged Update: %v reads, %v writes; want at most 4 and 0", r1-r0, w1-w0)
	}
}

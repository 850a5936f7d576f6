package openstack

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// update hands the Service's load balancer its nodes, as upstream's
// UpdateLoadBalancer contract ("update the hosts") and
// cloud-provider-openstack's own (updateOctaviaLoadBalancer: pool members
// per listener) say. It changes pool members only: per Service port, the
// members of the pool of the Service's listener on that port. It never
// creates or deletes a load balancer, listener, pool or monitor, never
// changes a listener's, pool's or monitor's settings, never allocates,
// releases or moves a floating IP and never adopts or tags: all that is
// EnsureLoadBalancer's, from the Service's spec. The router calls the
// update on load balancers a Service keeps or drains while it moves
// elsewhere (issue #43): their Service's new spec (an address requested of
// another backend, another health check, a port added) is not theirs, and
// applying it would take their address away before the drain ends.
//
// It never creates a load balancer: upstream's node sync calls it for
// Services whose delete may have just finished, and one made then would be
// left behind. Nor does it adopt a load balancer cloud-provider-openstack made
// (only an Ensure adopts), change one not ACTIVE (PENDING: retry; ERROR:
// an error, the next Ensure replaces it), join or change a shared load
// balancer the Service is not attached to, touch a duplicate (the next
// Ensure deletes it) or another Service's listeners. A Service whose load
// balancer is not found, a lost create pending included, has nothing to
// update (the create's Ensure sets the members once it lands).
func (l *LoadBalancer) update(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	o, err := l.updateOptions(svc)
	if err != nil {
		return err
	}
	sc, err := l.clients(ctx)
	if err != nil {
		return err
	}
	found, adopt, shared, err := l.lookup(ctx, sc, clusterName, svc)
	if err != nil || adopt || len(found) == 0 {
		return err
	}
	lb := &found[0]
	owns := ownerListeners(lb)
	if shared {
		if !slices.Contains(lb.Tags, l.sharedTag(svc)) {
			return nil
		}
		owns = l.sharerListeners(clusterName, svc)
	}
	switch lb.ProvisioningStatus {
	case lbActive:
	case lbError:
		return fmt.Errorf("load balancer %s is in ERROR: its members cannot change (the Service's next ensure replaces it)", lb.ID)
	default:
		return l.retry("load balancer %s is %s", lb.ID, lb.ProvisioningStatus)
	}
	st, err := l.state(ctx, sc, lb.ID)
	if err != nil {
		return err
	}
	steps, err := memberSteps(sc.loadBalancer, svc, selectNodes(nodes, o.nodeSelector), lb, st, owns, o)
	if err != nil {
		return err
	}
	if backends.DryRun(ctx) {
		for _, s := range steps {
			dryRun(ctx, backends.IntentChange, "octavia", s.what(false))
		}
		return nil
	}
	if len(steps) == 0 {
		return nil
	}
	return l.makeStep(ctx, sc, svc, lb, steps[0])
}

// updateAnnotations are the annotations the update reads: the nodes it
// selects and the subnet of the members of a pool that has none yet
// (and the class, whose config gives that subnet's defaults).
var updateAnnotations = []string{
	string(AnnotationNodeSelector), string(AnnotationMemberSubnetID), string(AnnotationPortID),
	string(AnnotationVIPSubnetID), string(AnnotationVIPNetworkID), string(AnnotationClass),
}

// updateOptions are the options the update needs, read from those of the
// Service's annotations alone: an annotation it does not read (a
// proxy-protocol the Service's new UDP port no longer allows, once it
// moved to another backend and this load balancer only drains) must not
// keep its nodes from it (review probe
// TestReview54UpdateIgnoresAnnotationsItDoesNotUse). A bad value of one it
// reads is the update's error, naming the annotation.
func (l *LoadBalancer) updateOptions(svc *corev1.Service) (*lbOptions, error) {
	only := svc.DeepCopy()
	only.Annotations = map[string]string{}
	for _, k := range updateAnnotations {
		if v, ok := svc.Annotations[k]; ok {
			only.Annotations[k] = v
		}
	}
	return parseOptions(only, l.settings)
}

// memberSteps are the member changes of the Service's pools, in the
// order of their listeners (protocol, then port): per Service port, the
// pool of the listener owns says is the Service's on that port and
// transport (whatever its protocol now: the annotations that chose it are
// Ensure's), its members the nodes at the port's node port. A port with no
// such listener, or no node port, and a missing pool are left to Ensure. A
// pool in ERROR is the error: Octavia changes nothing in it, and an update
// that skipped it would report the nodes handed over while the pool keeps
// its old members (review probe TestReview54UpdateOfPoolInErrorIsNoSuccess);
// the Service's next Ensure replaces it.
func memberSteps(c *gophercloud.ServiceClient, svc *corev1.Service, nodes []*corev1.Node, lb *loadbalancers.LoadBalancer, st *lbState, owns func(*listeners.Listener) bool, o *lbOptions) ([]*step, error) {
	type target struct {
		ls   *listeners.Listener
		pool *poolState
		port corev1.ServicePort
	}
	var targets []target
	for _, p := range svc.Spec.Ports {
		ls := portListener(st, owns, p)
		if ls == nil || p.NodePort == 0 {
			continue
		}
		switch pool := st.pools[ls.DefaultPoolID]; {
		case pool == nil:
		case pool.pool.ProvisioningStatus == lbError:
			return nil, fmt.Errorf("pool %s of listener %s is in ERROR: its members cannot change (the Service's next ensure replaces it)", pool.pool.ID, listenerName(ls.Protocol, ls.ProtocolPort))
		default:
			targets = append(targets, target{ls, pool, p})
		}
	}
	sort.Slice(targets, func(i, j int) bool {
		a, b := targets[i].ls, targets[j].ls
		return a.Protocol < b.Protocol || (a.Protocol == b.Protocol && a.ProtocolPort < b.ProtocolPort)
	})
	var out []*step
	for _, t := range targets {
		want := updatedMembers(svc, nodes, lb, t.pool, int(t.port.NodePort), o)
		if s := membersStep(c, listenerName(t.ls.Protocol, t.ls.ProtocolPort), t.pool, want); s != nil {
			out = append(out, s)
		}
	}
	return out, nil
}

// portListener is the Service's listener (owns) serving a Service port:
// on its port, of its transport (TCP, UDP or SCTP), or nil.
func portListener(st *lbState, owns func(*listeners.Listener) bool, p corev1.ServicePort) *listeners.Listener {
	proto, err := octaviaProtocol(p)
	if err != nil {
		return nil
	}
	for i := range st.listeners {
		ls := &st.listeners[i]
		if ls.ProtocolPort == int(p.Port) && owns(ls) && sameTransport(ls.Protocol, proto) {
			return ls
		}
	}
	return nil
}

// sameTransport reports whether two listener protocols share a transport:
// both of the TCP family (TCP, HTTP, HTTPS, TERMINATED_HTTPS), or equal.
func sameTransport(a, b string) bool {
	return a == b || (tcpFamily[a] && tcpFamily[b])
}

// updatedMembers are the pool's members for the nodes: each node's
// address at the node port, its monitor port what the pool's monitor
// checks (updateMonitorPort), on the subnet its members are on (none yet:
// the subnet Ensure puts them on).
func updatedMembers(svc *corev1.Service, nodes []*corev1.Node, lb *loadbalancers.LoadBalancer, p *poolState, nodePort int, o *lbOptions) []memberSpec {
	return nodeMembers(svc, nodes, nodePort, updateMonitorPort(svc, p), membersSubnet(svc, lb, p, o))
}

// updateMonitorPort is the members' monitor port under the pool's monitor
// as it is: for an HTTP monitor (externalTrafficPolicy Local's check of
// kube-proxy's health-check node port) the Service's health-check node
// port, else the one its members carry; none for any other monitor (it
// checks the member's own port) or none.
func updateMonitorPort(svc *corev1.Service, p *poolState) int {
	if p.monitor == nil || p.monitor.Type != "HTTP" {
		return 0
	}
	if svc.Spec.HealthCheckNodePort > 0 {
		return int(svc.Spec.HealthCheckNodePort)
	}
	for _, m := range p.members {
		if m.MonitorPort != 0 {
			return m.MonitorPort
		}
	}
	return 0
}

// membersSubnet is the subnet of the pool's members when they share one,
// else the one Ensure puts members on (membersFor, setMemberSubnet).
func membersSubnet(svc *corev1.Service, lb *loadbalancers.LoadBalancer, p *poolState, o *lbOptions) string {
	if len(p.members) > 0 && !slices.ContainsFunc(p.members, func(m pools.Member) bool { return m.SubnetID != p.members[0].SubnetID }) {
		return p.members[0].SubnetID
	}
	switch {
	case o.memberSubnetID != "":
		return o.memberSubnetID
	case isDualStack(svc) || o.portID != "":
		return lb.VipSubnetID
	}
	return o.vipSubnetID
}

package openstack

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// listenerSpec is one Service port as an Octavia listener with its pool.
type listenerSpec struct {
	name          string
	protocol      string // the listener's: HTTP with X-Forwarded-For, TERMINATED_HTTPS with TLS
	poolProtocol  string // PROXY or PROXYV2 with the PROXY protocol
	port          int
	cidrs         []string
	method        string
	connLimit     int
	timeouts      listenerTimeouts
	xForwardedFor bool
	tlsRef        string   // with TERMINATED_HTTPS
	tags          []string // a sharing Service's tag
	persistence   string   // the pool's session persistence: SOURCE_IP for sessionAffinity ClientIP
	members       []memberSpec
	monitor       *monitorSpec
}

// memberSpec is one node as a pool member.
type memberSpec struct {
	name        string
	address     string
	port        int
	monitorPort int
	subnetID    string
}

// monitorSpec is a pool's health monitor.
type monitorSpec struct {
	typ         string
	urlPath     string
	delay       int
	timeout     int
	retries     int
	retriesDown int
}

// persistenceSourceIP is the pools' session persistence for
// sessionAffinity: ClientIP, as cloud-provider-openstack sets it.
const persistenceSourceIP = "SOURCE_IP"

// memberKey identifies a member the way Octavia's batch update does.
func (m memberSpec) key() string { return fmt.Sprintf("%s:%d", m.address, m.port) }

// nodeAddress is the first InternalIP of a node: the address members use.
func nodeAddress(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && net.ParseIP(a.Address) != nil {
			return a.Address
		}
	}
	return ""
}

// desiredListeners turns a Service and its nodes into listener specs,
// sorted by protocol and port.
func desiredListeners(svc *corev1.Service, nodes []*corev1.Node, o *lbOptions) ([]listenerSpec, error) {
	cidrs, err := sourceRanges(svc)
	if err != nil {
		return nil, err
	}
	var out []listenerSpec
	for _, p := range svc.Spec.Ports {
		proto, err := octaviaProtocol(p)
		if err != nil {
			return nil, err
		}
		if p.NodePort == 0 {
			return nil, backends.NewUserError("NodePortRequired", fmt.Errorf("port %d/%s has no nodePort: the OpenStack backend sends traffic to node ports; remove allocateLoadBalancerNodePorts: false", p.Port, p.Protocol))
		}
		l := listenerSpec{
			name: fmt.Sprintf("mccm_%s_%d", strings.ToLower(proto), p.Port), protocol: proto, poolProtocol: proto, port: int(p.Port),
			cidrs: cidrs, method: o.method, connLimit: o.connLimit, timeouts: o.timeouts, monitor: monitorFor(svc, proto, o),
		}
		if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
			l.persistence = persistenceSourceIP
		}
		if o.xForwardedFor {
			l.protocol, l.poolProtocol, l.xForwardedFor = "HTTP", "HTTP", true
		}
		if o.tlsRef != "" {
			l.protocol, l.poolProtocol, l.tlsRef = "TERMINATED_HTTPS", "HTTP", o.tlsRef
		}
		if o.proxy != "" {
			l.poolProtocol = o.proxy
		}
		l.members = membersFor(svc, selectNodes(nodes, o.nodeSelector), int(p.NodePort), l.monitor, o)
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].protocol != out[j].protocol {
			return out[i].protocol < out[j].protocol
		}
		return out[i].port < out[j].port
	})
	return out, nil
}

func octaviaProtocol(p corev1.ServicePort) (string, error) {
	switch p.Protocol {
	case corev1.ProtocolTCP, "":
		return "TCP", nil
	case corev1.ProtocolUDP:
		return "UDP", nil
	case corev1.ProtocolSCTP:
		return "SCTP", nil
	}
	return "", backends.NewUserError("UnsupportedProtocol", fmt.Errorf("port %d has protocol %q: Octavia load balancers take TCP, UDP or SCTP", p.Port, p.Protocol))
}

// sourceRanges returns loadBalancerSourceRanges (or the annotation) as
// sorted CIDRs; nil when traffic from anywhere is allowed.
func sourceRanges(svc *corev1.Service) ([]string, error) {
	set, err := servicehelper.GetLoadBalancerSourceRanges(svc)
	if err != nil {
		return nil, backends.NewUserError("InvalidSourceRanges", fmt.Errorf("loadBalancerSourceRanges: %w; give CIDRs such as 203.0.113.0/24", err))
	}
	if servicehelper.IsAllowAll(set) {
		return nil, nil
	}
	out := set.StringSlice()
	sort.Strings(out)
	return out, nil
}

// monitorFor returns the health monitor of a port: HTTP on the health-check
// node port for externalTrafficPolicy Local, else a check of the node port.
func monitorFor(svc *corev1.Service, proto string, o *lbOptions) *monitorSpec {
	if !o.monitor {
		return nil
	}
	m := &monitorSpec{delay: o.delay, timeout: o.timeout, retries: o.retries, retriesDown: o.retriesDown}
	switch {
	case servicehelper.NeedsHealthCheck(svc) && svc.Spec.HealthCheckNodePort > 0:
		m.typ, m.urlPath = "HTTP", "/healthz"
	case proto == "UDP":
		m.typ = "UDP-CONNECT"
	default:
		m.typ = proto
	}
	return m
}

func membersFor(svc *corev1.Service, nodes []*corev1.Node, nodePort int, m *monitorSpec, o *lbOptions) []memberSpec {
	monitorPort := 0
	if m != nil && m.typ == "HTTP" {
		monitorPort = int(svc.Spec.HealthCheckNodePort)
	}
	subnet := o.memberSubnetID
	if subnet == "" {
		subnet = o.vipSubnetID
	}
	return nodeMembers(svc, nodes, nodePort, monitorPort, subnet)
}

// nodeMembers are the members for the nodes, each address once, at the
// node port, with the monitor port and on the subnet given, in key order:
// Ensure's (membersFor) and the update's (updatedMembers) alike.
func nodeMembers(svc *corev1.Service, nodes []*corev1.Node, nodePort, monitorPort int, subnet string) []memberSpec {
	var out []memberSpec
	seen := map[string]bool{}
	for _, n := range nodes {
		addr := memberAddress(svc, n)
		if addr == "" || seen[addr] {
			continue
		}
		seen[addr] = true
		out = append(out, memberSpec{name: n.Name, address: addr, port: nodePort, monitorPort: monitorPort, subnetID: subnet})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// sameCIDRs compares allowed CIDRs, nil and empty being the same.
func sameCIDRs(have, want []string) bool {
	h := slices.Clone(have)
	sort.Strings(h)
	return slices.Equal(h, want)
}

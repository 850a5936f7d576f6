package openstack

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Service annotations of the OpenStack backend. They are those of
// kubernetes/cloud-provider-openstack (OCCM), with its names and meanings,
// so manifests written for OCCM keep their settings; docs/openstack.md
// lists them with what differs.
const (
	// AnnotationInternal (bool, default false): the load balancer gets no
	// floating IP; its status carries the VIP address. OCCM's name.
	AnnotationInternal annotation.Name = "service.beta.kubernetes.io/openstack-internal-load-balancer"

	// AnnotationFloatingNetworkID (UUID, default: the backend's
	// loadBalancer.floatingNetworkID): the external network the floating IP
	// comes from. Setting it on a Service gives it a floating IP even when
	// the backend has no default floating network.
	AnnotationFloatingNetworkID annotation.Name = "loadbalancer.openstack.org/floating-network-id"

	// AnnotationFloatingSubnetID (UUID, default: Neutron's choice): the
	// subnet of the floating network the floating IP is allocated from.
	// Read when the floating IP is allocated.
	AnnotationFloatingSubnetID annotation.Name = "loadbalancer.openstack.org/floating-subnet-id"

	// AnnotationFloatingSubnet (pattern, default:
	// loadBalancer.floatingSubnet): picks the floating network's subnet by
	// name when no floating-subnet-id is set: a name or glob (`*`, `?`), or
	// "~" and a regular expression, matching the whole name; "!" first
	// negates it. Every matching subnet is tried until one has a free
	// address. Read when the floating IP is allocated.
	AnnotationFloatingSubnet annotation.Name = "loadbalancer.openstack.org/floating-subnet"

	// AnnotationFloatingSubnetTags (tag list, default:
	// loadBalancer.floatingSubnetTags): picks the floating network's subnet
	// by tags when no floating-subnet-id is set: comma-separated, any of
	// them present; "&" first: all of them; "!" first: the condition
	// negated. With floating-subnet, a subnet must match both. Read when the
	// floating IP is allocated.
	AnnotationFloatingSubnetTags annotation.Name = "loadbalancer.openstack.org/floating-subnet-tags"

	// AnnotationClass (name, default: none): a class of the backend's
	// loadBalancer.classes (OCCM's [LoadBalancerClass "name"]), a named set
	// of floating network and subnet, VIP network and subnet and member
	// subnet. The class's settings take precedence over the
	// floating-network-id, floating-subnet*, subnet-id and network-id
	// annotations; member-subnet-id wins over the class's. The VIP settings
	// are read at creation, the floating ones when the floating IP is
	// allocated, the member subnet always.
	AnnotationClass annotation.Name = "loadbalancer.openstack.org/class"

	// AnnotationKeepFloatingIP (bool, default false): on delete, the floating
	// IP is only disassociated and stays in the project, instead of being
	// released.
	AnnotationKeepFloatingIP annotation.Name = "loadbalancer.openstack.org/keep-floatingip"

	// AnnotationVIPSubnetID (UUID, default: loadBalancer.vipSubnetID): the
	// subnet of the VIP. Read when the load balancer is created.
	AnnotationVIPSubnetID annotation.Name = "loadbalancer.openstack.org/subnet-id"

	// AnnotationVIPNetworkID (UUID, default: loadBalancer.vipNetworkID): the
	// network of the VIP; without subnet-id, Octavia picks the subnet in it
	// (loadBalancer.vipSubnetID is not used then). Read at creation.
	AnnotationVIPNetworkID annotation.Name = "loadbalancer.openstack.org/network-id"

	// AnnotationPortID (UUID, default: none): an existing Neutron port to
	// use as the VIP port; it takes precedence over the subnet and network.
	// Read at creation.
	AnnotationPortID annotation.Name = "loadbalancer.openstack.org/port-id"

	// AnnotationMemberSubnetID (UUID, default: loadBalancer.memberSubnetID,
	// else the VIP subnet): the subnet members are reached through.
	AnnotationMemberSubnetID annotation.Name = "loadbalancer.openstack.org/member-subnet-id"

	// AnnotationFlavorID (UUID, default: loadBalancer.flavorID): the Octavia
	// flavor of the load balancer. Read at creation: Octavia cannot change
	// the flavor of a load balancer.
	AnnotationFlavorID annotation.Name = "loadbalancer.openstack.org/flavor-id"

	// AnnotationAvailabilityZone (string, default:
	// loadBalancer.availabilityZone): the Octavia availability zone of the
	// load balancer. Read at creation: Octavia cannot move a load balancer.
	AnnotationAvailabilityZone annotation.Name = "loadbalancer.openstack.org/availability-zone"

	// AnnotationLBMethod (string, default ROUND_ROBIN): the pools' algorithm,
	// one of ROUND_ROBIN, LEAST_CONNECTIONS, SOURCE_IP, SOURCE_IP_PORT (the
	// last only with providers that offer it, such as ovn).
	AnnotationLBMethod annotation.Name = "loadbalancer.openstack.org/lb-method"

	// AnnotationConnectionLimit (int, -1 or 1 and more, default -1 =
	// unlimited): the most connections each listener accepts.
	AnnotationConnectionLimit annotation.Name = "loadbalancer.openstack.org/connection-limit"

	// AnnotationTimeoutClientData (int ms 0-86400000, default 50000): how
	// long a client connection may be idle.
	AnnotationTimeoutClientData annotation.Name = "loadbalancer.openstack.org/timeout-client-data"

	// AnnotationTimeoutMemberConnect (int ms 0-86400000, default 5000): how
	// long connecting to a member may take.
	AnnotationTimeoutMemberConnect annotation.Name = "loadbalancer.openstack.org/timeout-member-connect"

	// AnnotationTimeoutMemberData (int ms 0-86400000, default 50000): how
	// long a member connection may be idle.
	AnnotationTimeoutMemberData annotation.Name = "loadbalancer.openstack.org/timeout-member-data"

	// AnnotationTimeoutTCPInspect (int ms 0-86400000, default 0): how long
	// to wait for more TCP data for content inspection.
	AnnotationTimeoutTCPInspect annotation.Name = "loadbalancer.openstack.org/timeout-tcp-inspect"

	// AnnotationProxyProtocol (string, default false): pools speak the PROXY
	// protocol to the members so they see the client's address: "true" or
	// "v1" for version 1 (PROXY pools), "v2" for version 2 (PROXYV2), "false"
	// for none. TCP ports only; not with x-forwarded-for. The status then
	// carries ipMode Proxy, so kube-proxy sends in-cluster traffic through
	// the load balancer too.
	AnnotationProxyProtocol annotation.Name = "loadbalancer.openstack.org/proxy-protocol"

	// AnnotationXForwardedFor (bool, default false): listeners are HTTP and
	// insert an X-Forwarded-For header with the client's address. TCP ports
	// only; not with proxy-protocol.
	AnnotationXForwardedFor annotation.Name = "loadbalancer.openstack.org/x-forwarded-for"

	// AnnotationDefaultTLSContainerRef (reference, default: none): listeners
	// terminate TLS (TERMINATED_HTTPS, HTTP pools) with this certificate:
	// a Barbican container or secret URL
	// (https://<barbican>/v1/containers/<uuid>), checked in Barbican before
	// a listener uses it; with loadBalancer.tlsContainerStore: external any
	// reference Octavia reads. TCP ports only. With x-forwarded-for the
	// listeners also insert the header.
	AnnotationDefaultTLSContainerRef annotation.Name = "loadbalancer.openstack.org/default-tls-container-ref"

	// AnnotationHealthMonitor (bool, default: loadBalancer.createMonitor):
	// whether pools get a health monitor. With externalTrafficPolicy: Local
	// it is an HTTP check of /healthz on the Service's healthCheckNodePort;
	// otherwise a TCP (UDP-CONNECT, SCTP) check of the NodePort.
	AnnotationHealthMonitor annotation.Name = "loadbalancer.openstack.org/enable-health-monitor"

	// AnnotationHealthMonitorDelay (int seconds 1-3600, default:
	// loadBalancer.monitorDelaySeconds): interval between checks.
	AnnotationHealthMonitorDelay annotation.Name = "loadbalancer.openstack.org/health-monitor-delay"

	// AnnotationHealthMonitorTimeout (int seconds 1-3600, default:
	// loadBalancer.monitorTimeoutSeconds): time a check may take; at most the
	// delay.
	AnnotationHealthMonitorTimeout annotation.Name = "loadbalancer.openstack.org/health-monitor-timeout"

	// AnnotationHealthMonitorMaxRetries (int 1-10, default:
	// loadBalancer.monitorMaxRetries): successful checks before a member is
	// up again.
	AnnotationHealthMonitorMaxRetries annotation.Name = "loadbalancer.openstack.org/health-monitor-max-retries"

	// AnnotationHealthMonitorMaxRetriesDown (int 1-10, default:
	// loadBalancer.monitorMaxRetriesDown): failed checks before a member is
	// down.
	AnnotationHealthMonitorMaxRetriesDown annotation.Name = "loadbalancer.openstack.org/health-monitor-max-retries-down"

	// AnnotationNodeSelector (comma-separated key=value or key, default:
	// every node): only nodes carrying all these labels (a bare key: the
	// label with any value) become members.
	AnnotationNodeSelector annotation.Name = "loadbalancer.openstack.org/node-selector"

	// AnnotationLoadBalancerID (UUID, default: none): the Octavia load
	// balancer of the Service. cloud-provider-openstack writes it on every
	// Service it serves; a Service carrying it keeps that load balancer
	// (adopted in place: same VIP, same floating IP). Naming another
	// Service's load balancer shares it: the Service adds its own listeners
	// (at most loadBalancer.maxSharedLB Services, no internal one, no port
	// another Service serves). Do not change it on a live Service. Written
	// back, as cloud-provider-openstack does, with the ID of the load
	// balancer serving the Service.
	AnnotationLoadBalancerID annotation.Name = "loadbalancer.openstack.org/load-balancer-id"

	// AnnotationLoadBalancerAddress (IP address, written by the backend,
	// default: none): the load balancer's address as cloud-provider-openstack
	// writes it, the floating IP or else the VIP (for a dual-stack Service
	// the primary address, the first of its status), also when the status
	// carries a host name (hostname). Removed when the Service is no longer
	// served by an OpenStack backend. Read-only.
	AnnotationLoadBalancerAddress annotation.Name = "loadbalancer.openstack.org/load-balancer-address"

	// AnnotationHostname (DNS name, default: none): the status carries this
	// host name instead of the address.
	AnnotationHostname annotation.Name = "loadbalancer.openstack.org/hostname"
)

// Octavia's limits on listener timeouts (milliseconds).
const maxTimeoutMillis = 24 * 60 * 60 * 1000

// lbOptions are a Service's load-balancer choices after defaults.
type lbOptions struct {
	internal          bool
	floatingNetworkID string
	floatingSubnet    floatingSubnetSpec
	keepFloatingIP    bool
	vipSubnetID       string
	vipNetworkID      string
	portID            string
	memberSubnetID    string
	flavorID          string
	availabilityZone  string
	method            string
	monitor           bool
	delay             int
	timeout           int
	retries           int
	retriesDown       int
	connLimit         int
	timeouts          listenerTimeouts
	proxy             string // "", PROXY or PROXYV2: the pools' protocol
	xForwardedFor     bool
	tlsRef            string
	nodeSelector      map[string]string
	hostname          string
}

// listenerTimeouts are a listener's four timeouts in milliseconds.
type listenerTimeouts struct {
	clientData, memberConnect, memberData, tcpInspect int
}

// defaultOptions are the options of a Service without annotations.
func defaultOptions(d *LoadBalancerSettings) *lbOptions {
	return &lbOptions{
		floatingNetworkID: d.FloatingNetworkID,
		floatingSubnet:    floatingSubnetSpec{id: d.FloatingSubnetID, name: d.FloatingSubnet, tags: d.FloatingSubnetTags, source: "loadBalancer.floatingSubnet* in the backend's config"},
		vipSubnetID:       d.VIPSubnetID, vipNetworkID: d.VIPNetworkID,
		memberSubnetID: d.MemberSubnetID, flavorID: d.FlavorID, availabilityZone: d.AvailabilityZone,
		method: "ROUND_ROBIN", monitor: *d.CreateMonitor, delay: d.MonitorDelaySeconds, timeout: d.MonitorTimeoutSeconds,
		retries: d.MonitorMaxRetries, retriesDown: d.MonitorMaxRetriesDown, connLimit: -1,
		timeouts: listenerTimeouts{clientData: 50000, memberConnect: 5000, memberData: 50000},
	}
}

// openstackID is the format of an OpenStack ID annotation; hint says where
// to find one.
func openstackID(hint string) annotation.IDFormat {
	return annotation.IDFormat{Pattern: uuidRE, Example: "3b1f2c4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f", Hint: hint}
}

// parseOptions reads a Service's annotations over the backend's defaults.
// Every bad value is reported at once, each naming its annotation and the
// fix, as one user error with reason annotation.ReasonInvalid.
func parseOptions(svc *corev1.Service, d *LoadBalancerSettings) (*lbOptions, error) {
	r := annotation.NewReader(svc.Annotations)
	o := defaultOptions(d)
	r.Bool(AnnotationInternal, &o.internal)
	r.Bool(AnnotationKeepFloatingIP, &o.keepFloatingIP)
	r.Bool(AnnotationHealthMonitor, &o.monitor)
	r.Bool(AnnotationXForwardedFor, &o.xForwardedFor)
	readIDs(r, o)
	readInts(r, o)
	readConnLimit(r, svc.Annotations, &o.connLimit)
	r.Enum(AnnotationLBMethod, &o.method, "ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT")
	readProxy(r, &o.proxy)
	readZone(r, &o.availabilityZone)
	readNodeSelector(r, svc.Annotations, &o.nodeSelector)
	readHostname(r, &o.hostname)
	readTLSRef(r, d.TLSContainerStore, &o.tlsRef)
	// A VIP subnet or network by annotation replaces the config's pair,
	// so the config's subnet never wins over the annotation's network.
	if r.Has(AnnotationVIPSubnetID) && !r.Has(AnnotationVIPNetworkID) {
		o.vipNetworkID = ""
	}
	if r.Has(AnnotationVIPNetworkID) && !r.Has(AnnotationVIPSubnetID) {
		o.vipSubnetID = ""
	}
	readFloatingSubnet(r, o)
	readClass(r, d, o)
	crossChecks(r, svc, o)
	var ips []netip.Addr // requestedIP and requestedIPOf read them.
	r.LoadBalancerIPs(&ips)
	if err := r.Err(); err != nil {
		return nil, err
	}
	if err := checkSpecLoadBalancerIP(svc); err != nil {
		return nil, err
	}
	return o, nil
}

// checkSpecLoadBalancerIP refuses a spec.loadBalancerIP that cannot be a
// load balancer's address (0.0.0.0, loopback, multicast, link-local):
// Neutron would refuse the floating IP, or Octavia the VIP, on every
// retry, after the load balancer was made. The annotation, when set,
// wins, and parseOptions checked it.
func checkSpecLoadBalancerIP(svc *corev1.Service) error {
	v := svc.Spec.LoadBalancerIP
	if v == "" || svc.Annotations[string(annotation.LoadBalancerIPs)] != "" {
		return nil
	}
	if ips, err := annotation.ParseLoadBalancerIPs(v); err != nil || len(ips) != 1 {
		return backends.NewUserError(annotation.ReasonInvalid, fmt.Errorf("spec.loadBalancerIP %q is not one usable IP address (not 0.0.0.0, loopback, multicast or link-local); fix it, or clear it and use annotation %s", v, annotation.LoadBalancerIPs))
	}
	return nil
}

// readIDs reads the ID annotations, in a fixed order.
func readIDs(r *annotation.Reader, o *lbOptions) {
	network, subnet := openstackID("`openstack network list`"), openstackID("`openstack subnet list`")
	for _, a := range []struct {
		name annotation.Name
		f    annotation.IDFormat
		out  *string
	}{
		{AnnotationFloatingNetworkID, network, &o.floatingNetworkID},
		{AnnotationVIPSubnetID, subnet, &o.vipSubnetID},
		{AnnotationVIPNetworkID, network, &o.vipNetworkID},
		{AnnotationPortID, openstackID("`openstack port list`"), &o.portID},
		{AnnotationMemberSubnetID, subnet, &o.memberSubnetID},
		{AnnotationFlavorID, openstackID("`openstack loadbalancer flavor list`"), &o.flavorID},
		{AnnotationLoadBalancerID, openstackID("`openstack loadbalancer list`"), new(string)},
	} {
		r.ID(a.name, a.f, a.out)
	}
}

// readFloatingSubnet reads the floating subnet annotations: the ID takes
// precedence over a name pattern and tags; any of them replaces the
// config's choice.
func readFloatingSubnet(r *annotation.Reader, o *lbOptions) {
	a := floatingSubnetSpec{source: "annotation " + string(AnnotationFloatingSubnetID)}
	if r.ID(AnnotationFloatingSubnetID, openstackID("`openstack subnet list --network <floating network>`"), &a.id) {
		o.floatingSubnet = a
		return
	}
	if r.String(AnnotationFloatingSubnet, &a.name) {
		if err := validateSubnetSpec(a.name, ""); err != nil {
			r.Invalid(AnnotationFloatingSubnet, a.name, err.Error())
		}
	}
	if r.String(AnnotationFloatingSubnetTags, &a.tags) {
		if err := validateSubnetSpec("", a.tags); err != nil {
			r.Invalid(AnnotationFloatingSubnetTags, a.tags, err.Error())
		}
	}
	if a.isSet() {
		a.source = "annotations " + string(AnnotationFloatingSubnet) + ", " + string(AnnotationFloatingSubnetTags)
		o.floatingSubnet = a
	}
}

// readClass applies the class the Service names: its settings take
// precedence over the annotations, except the member subnet annotation.
func readClass(r *annotation.Reader, d *LoadBalancerSettings, o *lbOptions) {
	var name string
	if !r.String(AnnotationClass, &name) {
		return
	}
	c, ok := d.Classes[name]
	if !ok {
		known := "the backend's config defines no classes (loadBalancer.classes)"
		if len(d.Classes) > 0 {
			known = "known classes: " + strings.Join(slices.Sorted(maps.Keys(d.Classes)), ", ")
		}
		r.Invalid(AnnotationClass, name, "no such class; "+known)
		return
	}
	if c.FloatingNetworkID != "" {
		o.floatingNetworkID = c.FloatingNetworkID
	}
	if s := c.floatingSubnet(name); s.isSet() {
		o.floatingSubnet = s
	}
	if c.VIPSubnetID != "" || c.VIPNetworkID != "" {
		o.vipSubnetID, o.vipNetworkID = c.VIPSubnetID, c.VIPNetworkID
	}
	if c.MemberSubnetID != "" && !r.Has(AnnotationMemberSubnetID) {
		o.memberSubnetID = c.MemberSubnetID
	}
}

// readInts reads the whole-number annotations with Octavia's ranges.
func readInts(r *annotation.Reader, o *lbOptions) {
	for _, a := range []struct {
		name   annotation.Name
		lo, hi int
		out    *int
	}{
		{AnnotationHealthMonitorDelay, 1, 3600, &o.delay},
		{AnnotationHealthMonitorTimeout, 1, 3600, &o.timeout},
		{AnnotationHealthMonitorMaxRetries, 1, 10, &o.retries},
		{AnnotationHealthMonitorMaxRetriesDown, 1, 10, &o.retriesDown},
		{AnnotationTimeoutClientData, 0, maxTimeoutMillis, &o.timeouts.clientData},
		{AnnotationTimeoutMemberConnect, 0, maxTimeoutMillis, &o.timeouts.memberConnect},
		{AnnotationTimeoutMemberData, 0, maxTimeoutMillis, &o.timeouts.memberData},
		{AnnotationTimeoutTCPInspect, 0, maxTimeoutMillis, &o.timeouts.tcpInspect},
	} {
		r.Int(a.name, a.lo, a.hi, a.out)
	}
}

// crossChecks reports combinations of annotations and ports that Octavia
// cannot serve.
func crossChecks(r *annotation.Reader, svc *corev1.Service, o *lbOptions) {
	a := svc.Annotations
	if o.timeout > o.delay {
		r.Invalid(AnnotationHealthMonitorTimeout, strconv.Itoa(o.timeout), fmt.Sprintf("must not exceed the delay (%d); lower it or raise %s", o.delay, AnnotationHealthMonitorDelay))
	}
	if o.proxy != "" && o.xForwardedFor {
		r.Invalid(AnnotationXForwardedFor, a[string(AnnotationXForwardedFor)], "cannot be used together with "+string(AnnotationProxyProtocol)+": remove one of them")
	}
	if o.proxy == "" && !o.xForwardedFor && o.tlsRef == "" {
		return
	}
	key := AnnotationProxyProtocol
	switch {
	case o.tlsRef != "":
		key = AnnotationDefaultTLSContainerRef
	case o.xForwardedFor:
		key = AnnotationXForwardedFor
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol != corev1.ProtocolTCP && p.Protocol != "" {
			r.Invalid(key, a[string(key)], fmt.Sprintf("needs TCP ports, but port %d is %s: remove the annotation or the port", p.Port, p.Protocol))
		}
	}
}

// readConnLimit reads connection-limit: -1 (no limit) or a positive number.
func readConnLimit(r *annotation.Reader, a map[string]string, out *int) {
	v, ok := a[string(AnnotationConnectionLimit)]
	if !ok {
		return
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n == 0 || n < -1 {
		r.Invalid(AnnotationConnectionLimit, v, "must be a positive whole number, or -1 for no limit")
		return
	}
	*out = n
}

// readProxy reads proxy-protocol as OCCM does: true and v1 are version 1,
// v2 version 2, false none.
func readProxy(r *annotation.Reader, out *string) {
	var v string
	if r.Enum(AnnotationProxyProtocol, &v, "true", "v1", "v2", "false") {
		*out = map[string]string{"true": "PROXY", "v1": "PROXY", "v2": "PROXYV2", "false": ""}[v]
	}
}

func readZone(r *annotation.Reader, out *string) {
	var v string
	if !r.String(AnnotationAvailabilityZone, &v) {
		return
	}
	if len(v) > maxNameLength {
		r.Invalid(AnnotationAvailabilityZone, v, fmt.Sprintf("must be the name of an Octavia availability zone (at most %d characters; `openstack loadbalancer availabilityzone list`)", maxNameLength))
		return
	}
	*out = v
}

// readNodeSelector parses "key=value, key2" into label requirements; a
// bare key asks only for the label to exist.
func readNodeSelector(r *annotation.Reader, a map[string]string, out *map[string]string) {
	var list []string
	if !r.List(AnnotationNodeSelector, &list) {
		return
	}
	sel := map[string]string{}
	for _, part := range list {
		key, value, _ := strings.Cut(part, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if len(validation.IsQualifiedName(key)) > 0 || (value != "" && len(validation.IsValidLabelValue(value)) > 0) {
			r.Invalid(AnnotationNodeSelector, a[string(AnnotationNodeSelector)], fmt.Sprintf("entry %q is not a label key or key=value; write e.g. env=production, gpu", part))
			return
		}
		sel[key] = value
	}
	*out = sel
}

func readHostname(r *annotation.Reader, out *string) {
	var v string
	if !r.String(AnnotationHostname, &v) {
		return
	}
	if len(validation.IsDNS1123Subdomain(v)) > 0 {
		r.Invalid(AnnotationHostname, v, "must be a DNS name such as lb.example.com")
		return
	}
	*out = v
}

// selectNodes keeps the nodes carrying every label of the selector.
func selectNodes(nodes []*corev1.Node, sel map[string]string) []*corev1.Node {
	if len(sel) == 0 {
		return nodes
	}
	var out []*corev1.Node
	for _, n := range nodes {
		if matchesLabels(n, sel) {
			out = append(out, n)
		}
	}
	return out
}

func matchesLabels(n *corev1.Node, sel map[string]string) bool {
	for k, v := range sel {
		have, ok := n.Labels[k]
		if !ok || (v != "" && have != v) {
			return false
		}
	}
	return true
}

package openstack

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Service annotations of the OpenStack backend. They are those of
// kubernetes/cloud-provider-openstack (OCCM), with its names and meanings,
// so manifests written for OCCM keep their settings; docs/openstack.md
// lists them with what differs.
const (
	// AnnotationInternal (bool, default false): the load balancer gets no
	// floating IP; its status carries the VIP address. OCCM's name.
	AnnotationInternal = "service.beta.kubernetes.io/openstack-internal-load-balancer"

	// AnnotationFloatingNetworkID (UUID, default: the backend's
	// loadBalancer.floatingNetworkID): the external network the floating IP
	// comes from. Setting it on a Service gives it a floating IP even when
	// the backend has no default floating network.
	AnnotationFloatingNetworkID = "loadbalancer.openstack.org/floating-network-id"

	// AnnotationFloatingSubnetID (UUID, default: Neutron's choice): the
	// subnet of the floating network the floating IP is allocated from.
	// Read when the floating IP is allocated.
	AnnotationFloatingSubnetID = "loadbalancer.openstack.org/floating-subnet-id"

	// AnnotationKeepFloatingIP (bool, default false): on delete, the floating
	// IP is only disassociated and stays in the project, instead of being
	// released.
	AnnotationKeepFloatingIP = "loadbalancer.openstack.org/keep-floatingip"

	// AnnotationVIPSubnetID (UUID, default: loadBalancer.vipSubnetID): the
	// subnet of the VIP. Read when the load balancer is created.
	AnnotationVIPSubnetID = "loadbalancer.openstack.org/subnet-id"

	// AnnotationVIPNetworkID (UUID, default: loadBalancer.vipNetworkID): the
	// network of the VIP, when no VIP subnet is set. Read at creation.
	AnnotationVIPNetworkID = "loadbalancer.openstack.org/network-id"

	// AnnotationPortID (UUID, default: none): an existing Neutron port to
	// use as the VIP port; it takes precedence over the subnet and network.
	// Read at creation.
	AnnotationPortID = "loadbalancer.openstack.org/port-id"

	// AnnotationMemberSubnetID (UUID, default: loadBalancer.memberSubnetID,
	// else the VIP subnet): the subnet members are reached through.
	AnnotationMemberSubnetID = "loadbalancer.openstack.org/member-subnet-id"

	// AnnotationFlavorID (UUID, default: loadBalancer.flavorID): the Octavia
	// flavor of the load balancer. Read at creation: Octavia cannot change
	// the flavor of a load balancer.
	AnnotationFlavorID = "loadbalancer.openstack.org/flavor-id"

	// AnnotationAvailabilityZone (string, default:
	// loadBalancer.availabilityZone): the Octavia availability zone of the
	// load balancer. Read at creation: Octavia cannot move a load balancer.
	AnnotationAvailabilityZone = "loadbalancer.openstack.org/availability-zone"

	// AnnotationLBMethod (string, default ROUND_ROBIN): the pools' algorithm,
	// one of ROUND_ROBIN, LEAST_CONNECTIONS, SOURCE_IP, SOURCE_IP_PORT (the
	// last only with providers that offer it, such as ovn).
	AnnotationLBMethod = "loadbalancer.openstack.org/lb-method"

	// AnnotationConnectionLimit (int, -1 or 1 and more, default -1 =
	// unlimited): the most connections each listener accepts.
	AnnotationConnectionLimit = "loadbalancer.openstack.org/connection-limit"

	// AnnotationTimeoutClientData (int ms 0-86400000, default 50000): how
	// long a client connection may be idle.
	AnnotationTimeoutClientData = "loadbalancer.openstack.org/timeout-client-data"

	// AnnotationTimeoutMemberConnect (int ms 0-86400000, default 5000): how
	// long connecting to a member may take.
	AnnotationTimeoutMemberConnect = "loadbalancer.openstack.org/timeout-member-connect"

	// AnnotationTimeoutMemberData (int ms 0-86400000, default 50000): how
	// long a member connection may be idle.
	AnnotationTimeoutMemberData = "loadbalancer.openstack.org/timeout-member-data"

	// AnnotationTimeoutTCPInspect (int ms 0-86400000, default 0): how long
	// to wait for more TCP data for content inspection.
	AnnotationTimeoutTCPInspect = "loadbalancer.openstack.org/timeout-tcp-inspect"

	// AnnotationProxyProtocol (string, default false): pools speak the PROXY
	// protocol to the members so they see the client's address: "true" or
	// "v1" for version 1 (PROXY pools), "v2" for version 2 (PROXYV2), "false"
	// for none. TCP ports only; not with x-forwarded-for. The status then
	// carries ipMode Proxy, so kube-proxy sends in-cluster traffic through
	// the load balancer too.
	AnnotationProxyProtocol = "loadbalancer.openstack.org/proxy-protocol"

	// AnnotationXForwardedFor (bool, default false): listeners are HTTP and
	// insert an X-Forwarded-For header with the client's address. TCP ports
	// only; not with proxy-protocol.
	AnnotationXForwardedFor = "loadbalancer.openstack.org/x-forwarded-for"

	// AnnotationHealthMonitor (bool, default: loadBalancer.createMonitor):
	// whether pools get a health monitor. With externalTrafficPolicy: Local
	// it is an HTTP check of /healthz on the Service's healthCheckNodePort;
	// otherwise a TCP (UDP-CONNECT, SCTP) check of the NodePort.
	AnnotationHealthMonitor = "loadbalancer.openstack.org/enable-health-monitor"

	// AnnotationHealthMonitorDelay (int seconds 1-3600, default:
	// loadBalancer.monitorDelaySeconds): interval between checks.
	AnnotationHealthMonitorDelay = "loadbalancer.openstack.org/health-monitor-delay"

	// AnnotationHealthMonitorTimeout (int seconds 1-3600, default:
	// loadBalancer.monitorTimeoutSeconds): time a check may take; at most the
	// delay.
	AnnotationHealthMonitorTimeout = "loadbalancer.openstack.org/health-monitor-timeout"

	// AnnotationHealthMonitorMaxRetries (int 1-10, default:
	// loadBalancer.monitorMaxRetries): successful checks before a member is
	// up again.
	AnnotationHealthMonitorMaxRetries = "loadbalancer.openstack.org/health-monitor-max-retries"

	// AnnotationHealthMonitorMaxRetriesDown (int 1-10, default:
	// loadBalancer.monitorMaxRetriesDown): failed checks before a member is
	// down.
	AnnotationHealthMonitorMaxRetriesDown = "loadbalancer.openstack.org/health-monitor-max-retries-down"

	// AnnotationNodeSelector (comma-separated key=value or key, default:
	// every node): only nodes carrying all these labels (a bare key: the
	// label with any value) become members.
	AnnotationNodeSelector = "loadbalancer.openstack.org/node-selector"

	// AnnotationLoadBalancerID (UUID, default: none): the Octavia load
	// balancer of the Service. cloud-provider-openstack writes it on every
	// Service it serves; a Service carrying it keeps that load balancer
	// (adopted in place: same VIP, same floating IP). It must be the
	// Service's own load balancer (named by cloud-provider-openstack or by
	// multicloud-ccm for this Service): sharing one load balancer among
	// Services is refused with an event.
	AnnotationLoadBalancerID = "loadbalancer.openstack.org/load-balancer-id"

	// AnnotationHostname (DNS name, default: none): the status carries this
	// host name instead of the address.
	AnnotationHostname = "loadbalancer.openstack.org/hostname"
)

// Event reason for a bad OpenStack annotation.
const reasonInvalidAnnotation = "InvalidOpenStackAnnotation"

// Octavia's limits on listener timeouts (milliseconds).
const maxTimeoutMillis = 24 * 60 * 60 * 1000

// lbOptions are a Service's load-balancer choices after defaults.
type lbOptions struct {
	internal          bool
	floatingNetworkID string
	floatingSubnetID  string
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
	nodeSelector      map[string]string
	hostname          string
}

// listenerTimeouts are a listener's four timeouts in milliseconds.
type listenerTimeouts struct {
	clientData, memberConnect, memberData, tcpInspect int
}

func annotationError(key, value, want string) error {
	return backends.NewUserError(reasonInvalidAnnotation, fmt.Errorf("annotation %s=%q: %s", key, value, want))
}

// defaultOptions are the options of a Service without annotations.
func defaultOptions(d *LoadBalancerSettings) *lbOptions {
	return &lbOptions{
		floatingNetworkID: d.FloatingNetworkID, vipSubnetID: d.VIPSubnetID, vipNetworkID: d.VIPNetworkID,
		memberSubnetID: d.MemberSubnetID, flavorID: d.FlavorID, availabilityZone: d.AvailabilityZone,
		method: "ROUND_ROBIN", monitor: *d.CreateMonitor, delay: d.MonitorDelaySeconds, timeout: d.MonitorTimeoutSeconds,
		retries: d.MonitorMaxRetries, retriesDown: d.MonitorMaxRetriesDown, connLimit: -1,
		timeouts: listenerTimeouts{clientData: 50000, memberConnect: 5000, memberData: 50000},
	}
}

// parseOptions reads a Service's annotations over the backend's defaults.
// Every bad value is reported at once, each naming its annotation and the
// fix, as one user error.
func parseOptions(svc *corev1.Service, d *LoadBalancerSettings) (*lbOptions, error) {
	a := svc.Annotations
	o := defaultOptions(d)
	var errs []error
	collect := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	collect(boolAnnotation(a, AnnotationInternal, &o.internal))
	collect(boolAnnotation(a, AnnotationKeepFloatingIP, &o.keepFloatingIP))
	collect(boolAnnotation(a, AnnotationHealthMonitor, &o.monitor))
	collect(boolAnnotation(a, AnnotationXForwardedFor, &o.xForwardedFor))
	for key, out := range map[string]*string{
		AnnotationFloatingNetworkID: &o.floatingNetworkID, AnnotationFloatingSubnetID: &o.floatingSubnetID,
		AnnotationVIPSubnetID: &o.vipSubnetID, AnnotationVIPNetworkID: &o.vipNetworkID, AnnotationPortID: &o.portID,
		AnnotationMemberSubnetID: &o.memberSubnetID, AnnotationFlavorID: &o.flavorID, AnnotationLoadBalancerID: new(string),
	} {
		collect(idAnnotation(a, key, out))
	}
	for key, r := range map[string]struct {
		lo, hi int
		out    *int
	}{
		AnnotationHealthMonitorDelay: {1, 3600, &o.delay}, AnnotationHealthMonitorTimeout: {1, 3600, &o.timeout},
		AnnotationHealthMonitorMaxRetries: {1, 10, &o.retries}, AnnotationHealthMonitorMaxRetriesDown: {1, 10, &o.retriesDown},
		AnnotationTimeoutClientData: {0, maxTimeoutMillis, &o.timeouts.clientData}, AnnotationTimeoutMemberConnect: {0, maxTimeoutMillis, &o.timeouts.memberConnect},
		AnnotationTimeoutMemberData: {0, maxTimeoutMillis, &o.timeouts.memberData}, AnnotationTimeoutTCPInspect: {0, maxTimeoutMillis, &o.timeouts.tcpInspect},
	} {
		collect(intAnnotation(a, key, r.lo, r.hi, r.out))
	}
	collect(connLimitAnnotation(a, &o.connLimit))
	collect(methodAnnotation(a, &o.method))
	collect(proxyAnnotation(a, &o.proxy))
	collect(zoneAnnotation(a, &o.availabilityZone))
	collect(nodeSelectorAnnotation(a, &o.nodeSelector))
	collect(hostnameAnnotation(a, &o.hostname))
	errs = append(errs, crossChecks(svc, o)...)
	if _, set := a[AnnotationVIPSubnetID]; set {
		if _, net := a[AnnotationVIPNetworkID]; !net {
			o.vipNetworkID = ""
		}
	}
	if len(errs) > 0 {
		return nil, joinUserErrors(errs)
	}
	return o, nil
}

// crossChecks reports combinations of annotations and ports that Octavia
// cannot serve.
func crossChecks(svc *corev1.Service, o *lbOptions) []error {
	var errs []error
	if o.timeout > o.delay {
		errs = append(errs, annotationError(AnnotationHealthMonitorTimeout, strconv.Itoa(o.timeout), fmt.Sprintf("must not exceed the delay (%d); lower it or raise %s", o.delay, AnnotationHealthMonitorDelay)))
	}
	if o.proxy != "" && o.xForwardedFor {
		errs = append(errs, annotationError(AnnotationXForwardedFor, svc.Annotations[AnnotationXForwardedFor], "cannot be used together with "+AnnotationProxyProtocol+": remove one of them"))
	}
	if o.proxy == "" && !o.xForwardedFor {
		return errs
	}
	key := AnnotationProxyProtocol
	if o.xForwardedFor {
		key = AnnotationXForwardedFor
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol != corev1.ProtocolTCP && p.Protocol != "" {
			errs = append(errs, annotationError(key, svc.Annotations[key], fmt.Sprintf("needs TCP ports, but port %d is %s: remove the annotation or the port", p.Port, p.Protocol)))
		}
	}
	return errs
}

// joinUserErrors keeps the user-error marking of a list of user errors.
func joinUserErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return backends.NewUserError(reasonInvalidAnnotation, fmt.Errorf("%s", strings.Join(msgs, "; ")))
}

func boolAnnotation(a map[string]string, key string, out *bool) error {
	v, ok := a[key]
	if !ok {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return annotationError(key, v, `must be "true" or "false"`)
	}
	*out = b
	return nil
}

func intAnnotation(a map[string]string, key string, lo, hi int, out *int) error {
	v, ok := a[key]
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return annotationError(key, v, fmt.Sprintf("must be a whole number from %d to %d", lo, hi))
	}
	*out = n
	return nil
}

func connLimitAnnotation(a map[string]string, out *int) error {
	v, ok := a[AnnotationConnectionLimit]
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n == 0 || n < -1 {
		return annotationError(AnnotationConnectionLimit, v, "must be a positive whole number, or -1 for no limit")
	}
	*out = n
	return nil
}

func idAnnotation(a map[string]string, key string, out *string) error {
	v, ok := a[key]
	if !ok {
		return nil
	}
	if !uuidRE.MatchString(v) {
		return annotationError(key, v, "must be an OpenStack ID (a UUID); find it with `openstack network list`, `openstack subnet list`, `openstack port list` or `openstack loadbalancer flavor list`")
	}
	*out = v
	return nil
}

func methodAnnotation(a map[string]string, out *string) error {
	v, ok := a[AnnotationLBMethod]
	if !ok {
		return nil
	}
	switch v {
	case "ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT":
		*out = v
		return nil
	}
	return annotationError(AnnotationLBMethod, v, "must be ROUND_ROBIN, LEAST_CONNECTIONS, SOURCE_IP or SOURCE_IP_PORT")
}

// proxyAnnotation reads proxy-protocol as OCCM does: true and v1 are
// version 1, v2 version 2, false none.
func proxyAnnotation(a map[string]string, out *string) error {
	v, ok := a[AnnotationProxyProtocol]
	if !ok {
		return nil
	}
	switch v {
	case "true", "v1":
		*out = "PROXY"
	case "v2":
		*out = "PROXYV2"
	case "false":
		*out = ""
	default:
		return annotationError(AnnotationProxyProtocol, v, `must be "v1" (or "true"), "v2" or "false"`)
	}
	return nil
}

func zoneAnnotation(a map[string]string, out *string) error {
	v, ok := a[AnnotationAvailabilityZone]
	if !ok {
		return nil
	}
	if strings.TrimSpace(v) == "" || len(v) > maxNameLength {
		return annotationError(AnnotationAvailabilityZone, v, "must be the name of an Octavia availability zone (`openstack loadbalancer availabilityzone list`)")
	}
	*out = v
	return nil
}

// nodeSelectorAnnotation parses "key=value, key2" into label requirements;
// a bare key asks only for the label to exist.
func nodeSelectorAnnotation(a map[string]string, out *map[string]string) error {
	v, ok := a[AnnotationNodeSelector]
	if !ok {
		return nil
	}
	sel := map[string]string{}
	for part := range strings.SplitSeq(v, ",") {
		key, value, _ := strings.Cut(strings.TrimSpace(part), "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if len(validation.IsQualifiedName(key)) > 0 || (value != "" && len(validation.IsValidLabelValue(value)) > 0) {
			return annotationError(AnnotationNodeSelector, v, fmt.Sprintf("entry %q is not a label key or key=value; write e.g. env=production, gpu", part))
		}
		sel[key] = value
	}
	*out = sel
	return nil
}

func hostnameAnnotation(a map[string]string, out *string) error {
	v, ok := a[AnnotationHostname]
	if !ok {
		return nil
	}
	if len(validation.IsDNS1123Subdomain(v)) > 0 {
		return annotationError(AnnotationHostname, v, "must be a DNS name such as lb.example.com")
	}
	*out = v
	return nil
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

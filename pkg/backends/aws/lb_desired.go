package aws

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	servicehelpers "k8s.io/cloud-provider/service/helpers"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
)

// desiredLB is what a Service asks for, computed before any mutating call.
type desiredLB struct {
	names   names
	scheme  string
	subnets []string
	// subnetsAnnotated is true when the Service's own subnet annotation
	// chose subnets: only then does a change replace an existing NLB.
	subnetsAnnotated bool
	targetType       string
	// targetChosen: no annotation set the target type, the node set chose
	// it (targetsFor); keepIPTargets may then keep IP targets the load
	// balancer already has.
	targetChosen bool
	// remembered: the backend remembered the Service's target type when
	// desired ran (targetTypes).
	remembered bool
	// keepIP: the targets are IP targets the node set chose for a node
	// that is no instance of the VPC (or kept since): kept when the node
	// set would choose instance targets again.
	keepIP bool
	// svc and targetNodes are the Service and the nodes its targets were
	// chosen from (after target-node-labels), for keepIPTargets.
	svc         *corev1.Service
	targetNodes []*corev1.Node
	ports       []desiredPort
	hc          healthCheck
	// tgAttrs are the target-group attributes the Service sets.
	tgAttrs map[string]string
	// lbAttrs are the NLB attributes the Service sets.
	lbAttrs map[string]string
	// extraTags are the Service's additional tags (also in tags).
	extraTags map[string]string
	// source is the Service d was made from, spec its specFingerprint
	// (specMemory).
	source *corev1.Service
	spec   string
	// retagBackend: the Service's NLB is tagged as another backend's, one
	// no longer live, or as none (the upstream provider's) while another
	// backend is live in the same VPC and region (observe, findLB); the
	// reconcile or node sync first tags it as this backend's (claim), so
	// that the other backend neither takes nor deletes it
	// (TestReview65cMoveOfAnAdoptedUpstreamNLBBetweenTwoBackendsOfOneVPC).
	// A lone backend adopts the upstream provider's NLB unchanged (a
	// switch from upstream changes nothing).
	retagBackend bool
	// byoSGs are the security groups the Service brings
	// (AnnotationSecurityGroups), extraSGs those it adds
	// (AnnotationExtraSecurityGroups).
	byoSGs, extraSGs []string
	// eips and privateIPs are the addresses the Service asks for
	// (AnnotationEIPAllocations, AnnotationPrivateIPv4Addresses); mappings
	// assigns them to subnets.
	eips, privateIPs []string
	mappings         map[string]subnetMapping
	// ipType is ipv4 or dualstack.
	ipType string
	// family is the target groups' IP address type, ipv4 or ipv6: the
	// Service's primary IP family (primaryFamily).
	family string
	// tls is what the TLS annotations ask for (nil: no TLS).
	tls *tlsConfig
	// manageBackend: the backend adds the instances' ingress rules from
	// its own security group (AnnotationManageBackendSGRules).
	manageBackend bool
	// sourceRanges are the CIDRs allowed in, sorted.
	sourceRanges []string
	// targets are instance IDs or IP addresses of the family; zone is
	// "all" for IPv4 addresses outside the VPC.
	targets []target
	tags    map[string]string
	// groupARNs are each port's target group by port, once
	// ensureForwarding made them (for the verified view).
	groupARNs map[int32]string
}

// desiredPort is one listener and its target group.
type desiredPort struct {
	port     int32
	protocol string // the target group's: TCP, UDP, TCP_UDP or TLS.
	nodePort int32
	tgName   string
	// listener is the listener's protocol: the target group's, or TLS
	// over a TCP target group.
	listener string
	// cert and sslPolicy are a TLS listener's certificate ARN and
	// security policy.
	cert, sslPolicy string
	// names are the Service's names of the port.
	names []string
}

type healthCheck struct {
	protocol string // TCP, HTTP or HTTPS.
	port     string // traffic-port or a number.
	path     string // "" for TCP.
	// interval and timeout are in seconds; healthy and unhealthy are the
	// threshold counts.
	interval, timeout, healthy, unhealthy int32
}

type target struct {
	id   string
	zone string
	// instance is an instance target's instance as desired looked it up
	// (nil: not looked up), so that its security groups are not looked
	// up again per target (instanceGroups).
	instance *ec2types.Instance
}

// annotationError is a user-fixable error about one annotation found
// after the annotations were read (a subnet AWS does not have, say).
func annotationError(n annotation.Name, value, fix string) error {
	return backends.NewUserError(annotation.ReasonInvalid, fmt.Errorf("annotation %s=%q: %s", n, value, fix))
}

// desired computes the Service's load balancer. Bad annotations or ports
// are user errors; nothing has been changed when it fails.
func (l *LoadBalancer) desired(ctx context.Context, svc *corev1.Service, nodes []*corev1.Node) (*desiredLB, error) {
	d := &desiredLB{names: namesFor(l.clusterID, svc), source: svc, spec: specFingerprint(svc)}
	d.tags = map[string]string{tagClusterPrefix + l.clusterID: "owned", tagService: d.names.service, tagBackend: l.backend}
	r := newReader(svc.Annotations)
	if v, ok := AnnotationType.Get(svc.Annotations); ok && v != typeNLB {
		r.Invalid(AnnotationType, v, "must be nlb (this backend makes Network Load Balancers only), or external or nlb-ip for a load balancer another controller manages")
	}
	d.scheme = readScheme(r)
	var targetType string
	r.Enum(AnnotationTargetType, &targetType, targetInstance, targetIP)
	d.hc = readHealthCheck(r, healthCheckOf(svc))
	d.tgAttrs = readTargetGroupAttributes(r, svc)
	d.lbAttrs = readLBAttributes(r)
	d.extraTags = readAdditionalTags(r)
	var targetLabels map[string]string
	r.pairs(AnnotationTargetNodeLabels, &targetLabels)
	readSecurityGroups(r, d)
	d.tls = readTLS(r, svc)
	readAddresses(r, d)
	d.family = primaryFamily(svc)
	readFamily(r, d, targetType)
	if err := r.Err(); err != nil {
		return nil, err
	}
	for k, v := range d.extraTags {
		d.tags[k] = v
	}
	nodes = withLabels(nodes, targetLabels)
	var err error
	if d.sourceRanges, err = sourceRanges(svc, d.ipType); err != nil {
		return nil, err
	}
	if d.subnets, err = l.subnetsFor(ctx, svc, d.scheme); err != nil {
		return nil, err
	}
	_, d.subnetsAnnotated = AnnotationSubnets.Get(svc.Annotations)
	if d.mappings, err = l.mapAddresses(ctx, d); err != nil {
		return nil, err
	}
	d.svc, d.targetNodes, d.targetChosen = svc, nodes, targetType == "" && d.family != familyIPv6
	kept, remembered := l.targetTypes.choice(svc)
	d.remembered = remembered
	if remembered && d.targetChosen && kept.keepIP {
		targetType, d.keepIP = targetIP, true // IP targets the node set chose are kept (keepIPTargets)
	}
	if err := l.chooseTargets(ctx, d, targetType); err != nil {
		return nil, err
	}
	l.warnNoTargets(ctx, d, len(nodes))
	return d, nil
}

// chooseTargets computes d's target type (tt, or the node set's choice
// when tt is ""), its targets and its ports, whose target groups are
// named by the type.
func (l *LoadBalancer) chooseTargets(ctx context.Context, d *desiredLB, tt string) error {
	var err error
	var forced bool
	if d.targetType, d.targets, forced, err = l.targetsFor(ctx, tt, d.targetNodes, d.family); err != nil {
		return err
	}
	d.keepIP = d.keepIP || (d.targetChosen && forced)
	d.ports, err = portsOf(d.svc, d.names, d.targetType, d.family, d.tls)
	return err
}

// keepIPTargets keeps the IP targets the Service's load balancer has when
// no annotation sets the target type and the node set now chooses
// instance targets (the last node outside the VPC's instances left): IP
// targets reach EC2 instances too, and switching would replace every
// target group (new groups, the listeners moved, the old groups deleted)
// for a change that needs one deregistration. The backend remembers what
// the node set chose (targetTypes; desired keeps IP targets from it);
// keepIPTargets serves a Service it has no memory of (after a restart):
// attached are the target groups the NLB's listeners use, and one of the
// Service's with IP targets makes d IP targets again. Only the annotation
// moves a Service off IP targets the node set chose (IP targets set by
// the annotation go back to the node set's choice when it is removed).
func (l *LoadBalancer) keepIPTargets(ctx context.Context, d *desiredLB, attached map[string]elbtypes.TargetGroup) error {
	if !d.targetChosen || d.targetType != targetInstance {
		return nil
	}
	if d.remembered {
		return nil // desired decided from the memory
	}
	for name, tg := range attached {
		if strings.HasPrefix(name, d.names.tgPrefix()) && tg.TargetType == elbtypes.TargetTypeEnumIp {
			d.keepIP = true
			if err := l.chooseTargets(ctx, d, targetIP); err != nil {
				return err
			}
			l.targetTypes.remember(d.svc, d.targetType, true)
			return nil
		}
	}
	l.targetTypes.remember(d.svc, d.targetType, false)
	return nil
}

// undecided reports whether d's target type is the node set's instance
// targets that keepIPTargets has yet to check against the load balancer's
// groups (no memory of the Service: a restart): observe then remembers
// nothing, or a sync failing before that check would leave a memory of
// instance targets that stops the next one from keeping IP targets.
func (d *desiredLB) undecided() bool {
	return d.targetChosen && d.targetType == targetInstance && !d.remembered
}

// readScheme reads AnnotationScheme, else AnnotationInternal; when both
// are set they must agree (the upstream provider reads only the latter, so
// it placed an adopted NLB by that one).
func readScheme(r *reader) string {
	if !r.Has(AnnotationScheme) {
		scheme, _ := readInternal(r)
		return scheme
	}
	scheme := schemeInternetFacing
	if !r.Enum(AnnotationScheme, &scheme, schemeInternal, schemeInternetFacing) {
		return scheme
	}
	if internal, set := readInternal(r); set && internal != scheme {
		r.Invalid(AnnotationScheme, scheme, fmt.Sprintf("contradicts %s (%s), which the upstream provider reads instead; remove one of them or make them agree", AnnotationInternal, internal))
	}
	return scheme
}

// readInternal reads AnnotationInternal as a scheme, and whether it is set
// to a good value. The upstream provider takes "false" and the empty value
// as internet-facing and any other value as internal; so does this backend
// for "false", "", the values strconv.ParseBool reads as true and
// upstream's "0.0.0.0/0". The rest ("False", "0", "no"...) is refused:
// upstream would make such an NLB internal, and guessing otherwise would
// replace an adopted internal NLB with an internet-facing one.
func readInternal(r *reader) (string, bool) {
	v, ok := AnnotationInternal.Get(r.values)
	if !ok {
		return schemeInternetFacing, false
	}
	switch v = strings.TrimSpace(v); v {
	case "false", "":
		return schemeInternetFacing, true
	case "0.0.0.0/0":
		return schemeInternal, true
	}
	if internal, err := strconv.ParseBool(v); err == nil && internal {
		return schemeInternal, true
	}
	r.Invalid(AnnotationInternal, v, `must be "true" or "false" (lower case: the upstream provider makes the load balancer internal for any value but "false")`)
	return schemeInternetFacing, false
}

// sourceRanges are the CIDRs the Service lets in (upstream's reading of
// spec.loadBalancerSourceRanges and its annotation; everyone by default).
// IPv6 CIDRs are for a dualstack NLB (ipType), which by default lets in
// every IPv6 client too (::/0), as the AWS Load Balancer Controller does.
func sourceRanges(svc *corev1.Service, ipType string) ([]string, error) {
	set, err := servicehelpers.GetLoadBalancerSourceRanges(svc)
	if err != nil {
		return nil, backends.NewUserError(reasonInvalidService, fmt.Errorf("service %s/%s: loadBalancerSourceRanges: %w; use CIDRs such as 203.0.113.0/24", svc.Namespace, svc.Name, err))
	}
	var out []string
	for _, n := range set.StringSlice() {
		ip, _, err := net.ParseCIDR(n)
		if err != nil || (ip.To4() == nil && ipType != "dualstack") {
			return nil, backends.NewUserError(reasonInvalidService, fmt.Errorf("service %s/%s: loadBalancerSourceRanges: %s is not an IPv4 CIDR and the load balancer is IPv4 only; set %s: dualstack to let IPv6 clients in, or remove it",
				svc.Namespace, svc.Name, n, AnnotationIPAddressType))
		}
		out = append(out, n)
	}
	if ipType == "dualstack" && len(svc.Spec.LoadBalancerSourceRanges) == 0 && strings.TrimSpace(svc.Annotations[corev1.AnnotationLoadBalancerSourceRangesKey]) == "" {
		out = append(out, allIPv6)
	}
	sort.Strings(out)
	return out, nil
}

// allIPv6 lets in every IPv6 client.
const allIPv6 = "::/0"

// healthCheckOf is the default health check, upstream's: kube-proxy's
// health endpoint for externalTrafficPolicy Local, else the traffic port.
func healthCheckOf(svc *corev1.Service) healthCheck {
	hc := healthCheck{protocol: "TCP", port: "traffic-port", interval: defaultHCInterval, healthy: defaultHCHealthy, unhealthy: defaultHCUnhealthy}
	if path, port := servicehelpers.GetServiceHealthCheckPathPort(svc); path != "" {
		hc.protocol, hc.port, hc.path = "HTTP", strconv.Itoa(int(port)), path
		hc.interval, hc.healthy, hc.unhealthy = localHCInterval, localHCHealthy, localHCUnhealthy
	}
	return hc
}

// portsOf groups the Service's ports into listeners: TCP and UDP on the
// same port become one TCP_UDP listener, which needs one NodePort for both.
func portsOf(svc *corev1.Service, n names, targetType, family string, tls *tlsConfig) ([]desiredPort, error) {
	byPort := map[int32]*desiredPort{}
	for _, p := range svc.Spec.Ports {
		if p.Protocol != corev1.ProtocolTCP && p.Protocol != corev1.ProtocolUDP {
			return nil, backends.NewUserError(reasonInvalidService, fmt.Errorf("service %s/%s: port %d uses protocol %s; AWS network load balancers take TCP and UDP", svc.Namespace, svc.Name, p.Port, p.Protocol))
		}
		if p.NodePort == 0 {
			return nil, backends.NewUserError(reasonInvalidService, fmt.Errorf("service %s/%s: port %d has no nodePort; do not set allocateLoadBalancerNodePorts to false", svc.Namespace, svc.Name, p.Port))
		}
		dp, seen := byPort[p.Port]
		switch {
		case !seen:
			byPort[p.Port] = &desiredPort{port: p.Port, protocol: string(p.Protocol), nodePort: p.NodePort, names: []string{p.Name}}
		case dp.protocol == string(p.Protocol) || dp.protocol == "TCP_UDP":
			return nil, backends.NewUserError(reasonInvalidService, fmt.Errorf("service %s/%s: port %d/%s is listed twice", svc.Namespace, svc.Name, p.Port, p.Protocol))
		case dp.nodePort != p.NodePort:
			return nil, backends.NewUserError(reasonInvalidService, fmt.Errorf("service %s/%s: port %d is both TCP (nodePort %d) and UDP (nodePort %d); an NLB serves both through one TCP_UDP target group, so give both the same nodePort", svc.Namespace, svc.Name, p.Port, dp.nodePort, p.NodePort))
		default:
			dp.protocol, dp.names = "TCP_UDP", append(dp.names, p.Name)
		}
	}
	out := make([]desiredPort, 0, len(byPort))
	for _, dp := range byPort {
		dp.listener = dp.protocol
		if tls.wants(dp) {
			dp.listener, dp.cert, dp.sslPolicy = "TLS", tls.cert, tls.policy
			if tls.backendTLS {
				dp.protocol = "TLS"
			}
		}
		dp.tgName = n.targetGroupOf(dp.port, dp.protocol, targetType, family)
		out = append(out, *dp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].port < out[j].port })
	return out, nil
}

// targetsFor chooses the target type (tt, the annotation's, else instance
// when every node is an instance of the VPC, else ip) and the targets. An
// IPv6 family's targets are always the nodes' IPv6 addresses (ip).
//
// A node whose instance is gone (terminated, or no longer listed: a
// routine scale-in while its Node is still there) is simply not a target,
// of either type; it counts as an instance for the choice, so that it
// never moves the Service from instance to IP targets and back. Only the
// annotation or the node set (another cloud's node, an instance of
// another VPC) chooses the type.
//
// A node without a providerID yet (registered, not initialised by the
// node controller: every node joining the cluster, for a few seconds) has
// no say in the choice either: it is an IP target when the others chose
// IP targets, else no target until its providerID names its instance.
// Before, each joining node made every NLB without the annotation switch
// to IP targets (new target groups, the listeners moved to them) and back
// once it was initialised. With no node to choose (none has a providerID:
// a cluster whose nodes are never initialised by a CCM), the targets are
// IP targets, as before.
//
// forced reports that the node set chose IP targets for a node that is no
// instance of the VPC (not for want of any node with a providerID): such a
// choice is kept (keepIPTargets).
func (l *LoadBalancer) targetsFor(ctx context.Context, tt string, nodes []*corev1.Node, family string) (_ string, _ []target, forced bool, _ error) {
	if family == familyIPv6 {
		ts, err := l.ipTargets(ctx, nodes, family)
		return targetIP, ts, false, err
	}
	set := tt != ""
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = l.regionalID(n)
	}
	listed, err := l.instances.cache.listed(ctx, ids)
	if err != nil {
		// The listing failed: each node is looked up alone (vpcInstance),
		// as before the batch, so only a Service with EC2 nodes meets
		// EC2's error, and one of other clouds' nodes is not failed by it.
		listed = make([]*ec2types.Instance, len(ids))
	}
	var found []target
	var live, unknown []*corev1.Node
	voters, all := 0, true
	for i, n := range nodes {
		if n.Spec.ProviderID == "" {
			unknown = append(unknown, n)
			continue
		}
		in, gone, err := l.vpcInstance(ctx, n, ids[i], listed[i])
		if err != nil {
			return "", nil, false, err
		}
		voters++
		if gone {
			continue
		}
		found, live, all = append(found, in), append(live, n), all && in.id != ""
	}
	if !set {
		tt = targetIP
		if voters > 0 && all {
			tt = targetInstance
		}
		forced = voters > 0 && !all
	}
	if tt == targetInstance {
		return tt, instanceTargets(found), false, nil
	}
	ts, err := l.ipTargets(ctx, append(live, unknown...), family)
	return tt, ts, forced, err
}

// withLabels keeps the nodes carrying every label in want (an empty value
// matches any value), as upstream's target-node-labels does.
// targetNodeLabels is the Service's AnnotationTargetNodeLabels; nil when
// unset or invalid (desired reports an invalid value as the Service's
// error).
//
// CanTarget asks for it once per node of every call, so the parsed value
// is kept by the annotation's text (nodeLabelsParsed): parsing it again for
// each of 5,000 nodes, several times per EnsureLoadBalancer, cost 3.5 ms a
// pass over the nodes. The map returned is shared: callers only read it.
func targetNodeLabels(svc *corev1.Service) map[string]string {
	if p := parsedTargetNodeLabels(svc); p != nil {
		return p.m
	}
	return nil
}

// nodeLabels is a parsed target-node-labels value: as a map, and as the
// pairs CanTarget checks a node against (a slice: ranging over the map for
// every node of every pass cost a quarter of hasLabels' time at 5,000
// nodes).
type nodeLabels struct {
	m     map[string]string
	pairs []labelPair
}

type labelPair struct{ key, value string }

// lastNodeLabels is the value parsedTargetNodeLabels returned last: the
// router asks CanTarget about every node of a Service in a row, so one
// string comparison (its text is the same string, compared by pointer
// first) answers most calls without hashing the text into nodeLabelsParsed.
type lastNodeLabels struct {
	text   string
	parsed *nodeLabels
}

var lastParsedNodeLabels atomic.Pointer[lastNodeLabels]

// parsedTargetNodeLabels is the Service's AnnotationTargetNodeLabels
// parsed; nil when unset, invalid or empty.
func parsedTargetNodeLabels(svc *corev1.Service) *nodeLabels {
	v, ok := AnnotationTargetNodeLabels.Get(svc.Annotations)
	if !ok {
		return nil
	}
	if last := lastParsedNodeLabels.Load(); last != nil && last.text == v {
		return last.parsed
	}
	var parsed *nodeLabels
	if hit, ok := nodeLabelsParsed.Load(v); ok {
		parsed = hit.(*nodeLabels) //nolint:forcetypeassert // only *nodeLabels are stored.
	} else {
		r := newReader(map[string]string{string(AnnotationTargetNodeLabels): v})
		var want map[string]string
		if r.pairs(AnnotationTargetNodeLabels, &want) && r.Err() == nil && len(want) > 0 {
			parsed = &nodeLabels{m: want, pairs: labelPairs(want)}
		}
		if nodeLabelsKept.Add(1) > maxNodeLabelsKept {
			nodeLabelsParsed.Clear()
			nodeLabelsKept.Store(1)
		}
		nodeLabelsParsed.Store(v, parsed)
	}
	lastParsedNodeLabels.Store(&lastNodeLabels{text: v, parsed: parsed})
	return parsed
}

func labelPairs(want map[string]string) []labelPair {
	out := make([]labelPair, 0, len(want))
	for k, v := range want {
		out = append(out, labelPair{k, v})
	}
	slices.SortFunc(out, func(a, b labelPair) int { return strings.Compare(a.key, b.key) })
	return out
}

// nodeLabelsParsed maps a target-node-labels annotation's text to its
// parsed labels (nil: invalid), for the process; there are as many entries
// as distinct values, dropped all at once past maxNodeLabelsKept.
var (
	nodeLabelsParsed  sync.Map
	nodeLabelsKept    atomic.Int64
	maxNodeLabelsKept int64 = 1024
)

func withLabels(nodes []*corev1.Node, want map[string]string) []*corev1.Node {
	if len(want) == 0 {
		return nodes
	}
	pairs := labelPairs(want)
	var out []*corev1.Node
	for _, n := range nodes {
		if hasLabels(n, pairs) {
			out = append(out, n)
		}
	}
	return out
}

// hasLabels reports whether n carries every label in want (an empty value
// matches any value). CanTarget asks it of every node for every call.
func hasLabels(n *corev1.Node, want []labelPair) bool {
	for _, p := range want {
		if have, ok := n.Labels[p.key]; !ok || (p.value != "" && have != p.value) {
			return false
		}
	}
	return true
}

func instanceTargets(found []target) []target {
	out := make([]target, 0, len(found))
	for _, t := range found {
		if t.id != "" {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// regionalID is the node's instance ID when its providerID names an
// instance of the backend's region, else "" (another cloud's node, another
// region's: no lookup).
func (l *LoadBalancer) regionalID(n *corev1.Node) string {
	if s, err := providerid.Scheme(n.Spec.ProviderID); err != nil || s != Scheme {
		return ""
	}
	id, err := regionalInstanceID(n, l.settings.Region)
	if err != nil {
		return ""
	}
	return id
}

// vpcInstance returns, as an instance target with its instance, node n
// (instance id, "" for none: regionalID) when it is a live instance of the
// backend's VPC, or a target with no ID (another cloud's node, another
// region's, another VPC's); gone reports a node of this region whose
// instance is terminated or no longer listed. in is the instance as the
// listing has it (listed), nil to look it up.
func (l *LoadBalancer) vpcInstance(ctx context.Context, n *corev1.Node, id string, in *ec2types.Instance) (_ target, gone bool, _ error) {
	if id == "" {
		return target{}, false, nil
	}
	var err error
	if in == nil {
		in, err = l.instances.byInstanceID(ctx, id)
	}
	if err != nil {
		return target{}, false, fmt.Errorf("looking up node %s: %w", n.Name, err)
	}
	switch {
	case in == nil || isState(in, "terminated"):
		return target{}, true, nil
	case awssdk.ToString(in.VpcId) != l.settings.VPC:
		return target{}, false, nil
	}
	return target{id: id, instance: in}, false, nil
}

// ipTargets targets each node's first InternalIP of the family (IPv4:
// addresses outside the VPC's subnets get zone "all", as AWS requires;
// IPv6: the first inside an IPv6 block of the VPC's subnets, as AWS takes
// no other). A node without one is not a target.
func (l *LoadBalancer) ipTargets(ctx context.Context, nodes []*corev1.Node, family string) ([]target, error) {
	subnets, err := l.vpcSubnets(ctx)
	if err != nil {
		return nil, err
	}
	var out []target
	seen := map[string]bool{}
	for _, n := range nodes {
		ip := nodeIPv4(n)
		if family == familyIPv6 {
			ip = nodeIPv6In(n, subnets)
		}
		if ip == nil || seen[ip.String()] {
			continue
		}
		seen[ip.String()] = true
		t := target{id: ip.String(), zone: "all"}
		if inSubnets(subnets, ip) {
			t.zone = ""
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, nil
}

// nodeIPv4 returns the node's first IPv4 InternalIP.
func nodeIPv4(n *corev1.Node) net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip := net.ParseIP(a.Address); ip != nil && ip.To4() != nil {
			return ip.To4()
		}
	}
	return nil
}

// CanTarget tells the router which nodes to hand the backend: its own EC2
// instances always, and, unless the Service asks for instance targets,
// every node whose first IPv4 InternalIP is private (RFC 1918 or
// 100.64.0.0/10): AWS takes IP targets outside the VPC only from those
// ranges, so a node with a public address would make every registration
// fail. For an IPv6-primary Service, a node with an IPv6 InternalIP
// (ipTargets keeps those inside the VPC's IPv6 blocks).
//
// A node outside the Service's aws-load-balancer-target-node-labels is never
// targeted (desired leaves it out too), so the router hands it to no
// update and a change of it updates no NLB: with a target subset, the
// churn of the other nodes costs nothing.
func (l *LoadBalancer) CanTarget(svc *corev1.Service, node *corev1.Node) bool {
	if want := parsedTargetNodeLabels(svc); want != nil && !hasLabels(node, want.pairs) {
		return false
	}
	if s, err := providerid.Scheme(node.Spec.ProviderID); err == nil && s == Scheme {
		return true
	}
	if v, _ := AnnotationTargetType.Get(svc.Annotations); v == targetInstance {
		return false
	}
	if primaryFamily(svc) == familyIPv6 {
		return hasIPv6(node)
	}
	ip := nodeIPv4(node)
	return ip != nil && (ip.IsPrivate() || cgnat.Contains(ip))
}

// cgnat is the shared address space (RFC 6598) AWS accepts for IP targets.
var cgnat = &net.IPNet{IP: net.IPv4(100, 64, 0, 0).To4(), Mask: net.CIDRMask(10, 32)}

// splitList splits a comma-separated annotation value.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

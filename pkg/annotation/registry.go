package annotation

import (
	"fmt"
	"math"
	"regexp"
	"strings"
)

// Kind is the form of an annotation's value. One kind is one way of
// reading a value: the Reader method or Parse function the backends call,
// the CEL check the chart's admission policy runs (pkg/admission generates
// it from the kind) and the sentence docs/annotations.md gives.
type Kind string

// The kinds of annotation values.
const (
	// KindBackends: backend names, comma-separated (ParseLoadBalancerBackends).
	KindBackends Kind = "backends"
	// KindString: any non-empty value, white space around it ignored
	// (Reader.String); at most Spec.MaxLen characters when set.
	KindString Kind = "string"
	// KindBool: "true" or "false" (Reader.Bool).
	KindBool Kind = "bool"
	// KindAWSInternal: the upstream AWS provider's internal flag: "false" or
	// empty, "0.0.0.0/0" or a strconv.ParseBool true value.
	KindAWSInternal Kind = "aws-internal"
	// KindInt: a whole number from Spec.Min to Spec.Max (Reader.Int),
	// except Spec.Except when ExceptSet.
	KindInt Kind = "int"
	// KindEnum: one of Spec.Values, compared exactly (Reader.Enum).
	KindEnum Kind = "enum"
	// KindEnumFold: one of Spec.Values in any case.
	KindEnumFold Kind = "enum-fold"
	// KindList: comma-separated non-empty entries (Reader.List).
	KindList Kind = "list"
	// KindUpstreamList: the upstream AWS provider's lists: comma-separated,
	// white space around entries ignored, empty entries skipped, at least
	// one entry (Spec.Want says so).
	KindUpstreamList Kind = "upstream-list"
	// KindListOrStar: "*" or a KindList.
	KindListOrStar Kind = "list-or-star"
	// KindMap: comma-separated key=value with unique non-empty keys
	// (Reader.Map).
	KindMap Kind = "map"
	// KindPairs: the upstream AWS provider's Key=Value, Key= or Key list;
	// empty entries skipped; keys in Spec.Values or starting with one of
	// Spec.Prefixes refused.
	KindPairs Kind = "pairs"
	// KindID: one ID of Spec.Format (Reader.ID).
	KindID Kind = "id"
	// KindIDs: comma-separated IDs of Spec.Format, without repeats
	// (Reader.IDs).
	KindIDs Kind = "ids"
	// KindLoadBalancerIPs: at most one usable address per IP family
	// (ParseLoadBalancerIPs).
	KindLoadBalancerIPs Kind = "load-balancer-ips"
	// KindIPList: comma-separated IP addresses, as MetalLB reads them, at
	// most one per family; with Spec.Hostnames also DNS names, as kube-vip
	// reads them (it resolves them).
	KindIPList Kind = "ip-list"
	// KindIPv4s: comma-separated IPv4 addresses (the AWS backend's private
	// addresses).
	KindIPv4s Kind = "ipv4s"
	// KindSharingKey: a sharing key (ParseAllowSharedIP).
	KindSharingKey Kind = "sharing-key"
	// KindPort: "traffic-port" or a port number.
	KindPort Kind = "port"
	// KindHTTPPath: a path starting with /, at most Spec.MaxLen characters,
	// without white space.
	KindHTTPPath Kind = "http-path"
	// KindStar: exactly "*".
	KindStar Kind = "star"
	// KindDNSName: a DNS subdomain (RFC 1123).
	KindDNSName Kind = "dns-name"
	// KindLabelSelector: comma-separated label keys or key=value.
	KindLabelSelector Kind = "label-selector"
	// KindDuration: a Go duration that is not negative
	// (ParseLoadBalancerDrain).
	KindDuration Kind = "duration"
	// KindUnchecked: not checked at admission (written by a controller, or
	// a value only the cloud can judge); documented only.
	KindUnchecked Kind = "unchecked"
)

// Spec is one annotation of the registry: its name, the kind of its value
// with the kind's parameters, who reads it and what changing it on a live
// Service does.
type Spec struct {
	Name Name
	Kind Kind
	// ReadBy is who reads it: "router", or the backend types that do
	// (aws, openstack, baremetal), comma-separated (Readers).
	ReadBy string
	// Min and Max bound a KindInt; Except is a value inside them that is
	// refused when ExceptSet.
	Min, Max  int
	Except    int
	ExceptSet bool
	// Values are a KindEnum's or KindEnumFold's values, or a KindPairs'
	// refused keys.
	Values []string
	// Prefixes are a KindPairs' refused key prefixes.
	Prefixes []string
	// Format is a KindID's or KindIDs' format.
	Format IDFormat
	// MaxLen bounds a KindString or KindHTTPPath (0: no bound).
	MaxLen int
	// Exact: a KindEnum value is compared as written, white space
	// included. Trimmed: the message quotes the value without the white
	// space around it (the reader trims it first).
	Exact, Trimmed bool
	// Want replaces the kind's "must be ..." text where the reader writes
	// its own (e.g. "must be a positive whole number, or -1 for no limit").
	Want string
	// WrittenBack: the backend writes the annotation on the Services it
	// serves, so adding it is no change to warn about.
	WrittenBack bool
	// Hostnames: a KindIPList entry may be a DNS name.
	Hostnames bool
	// KubeVIPMark, when set, is the annotation with which the bare-metal
	// backend marks ("true") a kube-vip.io/loadbalancerIPs value it wrote
	// itself. Where a bare-metal backend announces through kube-vip
	// (Cluster.KubeVIP), a value without the mark is the user's request of
	// addresses, which the backend reads with ParseKubeVIPIPs; otherwise
	// the value is read as Kind says.
	KubeVIPMark Name
	// HTTPHealthCheckOnly: the value is read only when the Service's
	// health check is HTTP or HTTPS (HTTPHealthCheck); otherwise any value
	// is ignored, and not checked.
	HTTPHealthCheckOnly bool
	// Replaces, when set, is what a change of the value does to a running
	// load balancer that the user should know first, e.g. "replaces the
	// NLB (and its DNS name)". The admission policy warns with it.
	Replaces string
}

// AnyInt is Spec.Max of a KindInt bounded only by the Go int.
const AnyInt = math.MaxInt64

// Formats of IDs the backends read.
var (
	// AWSSecurityGroupID is the format of security-group IDs.
	AWSSecurityGroupID = IDFormat{
		Pattern: regexp.MustCompile(`^sg-([0-9a-f]{8}|[0-9a-f]{17})$`),
		Example: "sg-0123456789abcdef0",
		Hint:    "`aws ec2 describe-security-groups`",
	}
	// AWSCertificateARN is the format of ACM and IAM certificate ARNs.
	AWSCertificateARN = IDFormat{
		Pattern: regexp.MustCompile(`^arn:aws[a-z-]*:(acm:[a-z0-9-]+:[0-9]{12}:certificate/[0-9a-zA-Z-]+|iam::[0-9]{12}:server-certificate/[\w+=,.@/-]+)$`),
		Example: "arn:aws:acm:eu-west-1:123456789012:certificate/12345678-1234-1234-1234-123456789012",
		Hint:    "`aws acm list-certificates`",
	}
	// AWSEIPAllocationID is the format of Elastic IP allocation IDs.
	AWSEIPAllocationID = IDFormat{
		Pattern: regexp.MustCompile(`^eipalloc-([0-9a-f]{8}|[0-9a-f]{17})$`),
		Example: "eipalloc-0123456789abcdef0",
		Hint:    "`aws ec2 describe-addresses`",
	}
)

// openstackID is the format of an OpenStack ID annotation.
func openstackID(hint string) IDFormat {
	f := UUID
	f.Hint = hint
	return f
}

// Consequences of changes, as the backends' docs give them.
const (
	replacesNLB      = "replaces the NLB (and its DNS name): a new one is created and the old one deleted"
	readAtCreationOS = "is read only when the load balancer is created: the running one keeps its setting (delete and re-create the Service to apply it)"
)

// Registry is every Service annotation multicloud-ccm reads whose value it
// checks, with its kind: the parsers read them this way, the chart's
// admission policy is generated from it (pkg/admission) and
// docs/annotations.md describes each from it (hack/gen-docs). Annotations
// the router writes are KindUnchecked.
var Registry = []Spec{
	{Name: LoadBalancerBackend, Kind: KindBackends, ReadBy: "router", Replaces: "moves the load balancer: it is created in the new backend and deleted from the old one"},
	{Name: LoadBalancerDrain, Kind: KindDuration, ReadBy: "router"},
	{Name: LoadBalancerDraining, Kind: KindUnchecked, ReadBy: "router"},
	{Name: LoadBalancerIPs, Kind: KindLoadBalancerIPs, ReadBy: "baremetal,openstack"},
	{Name: AllowSharedIP, Kind: KindSharingKey, ReadBy: "baremetal"},
	{Name: "multicloud-ccm.io/address-pool", Kind: KindString, ReadBy: "baremetal"},
	{Name: "multicloud-ccm.io/kube-vip-announced", Kind: KindUnchecked, ReadBy: "baremetal"},
	{Name: LoadBalancerBackends, Kind: KindUnchecked, ReadBy: "router"},
	{Name: LoadBalancerServedBy, Kind: KindUnchecked, ReadBy: "router"},
	{Name: LoadBalancerID, Kind: KindUnchecked, ReadBy: "router"},

	// MetalLB's and kube-vip's address requests: the bare-metal backend
	// keeps their addresses out of its own allocation.
	{Name: "metallb.io/loadBalancerIPs", Kind: KindIPList, ReadBy: "baremetal"},
	{Name: "metallb.universe.tf/loadBalancerIPs", Kind: KindIPList, ReadBy: "baremetal"},
	{Name: "kube-vip.io/loadbalancerIPs", Kind: KindIPList, ReadBy: "baremetal", Hostnames: true, KubeVIPMark: "multicloud-ccm.io/kube-vip-announced"},

	{Name: "service.beta.kubernetes.io/aws-load-balancer-type", Kind: KindEnum, ReadBy: "aws", Values: []string{"nlb", "external", "nlb-ip"}, Exact: true,
		Want:     "must be nlb (this backend makes Network Load Balancers only), or external or nlb-ip for a load balancer another controller manages",
		Replaces: "hands the load balancer over: with external or nlb-ip the backend stops managing it and leaves the NLB it made in AWS (delete it by hand); back to nlb it creates a new one"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-scheme", Kind: KindEnum, ReadBy: "aws", Values: []string{"internal", "internet-facing"}, Replaces: replacesNLB},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-internal", Kind: KindAWSInternal, ReadBy: "aws", Trimmed: true, Replaces: replacesNLB},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-subnets", Kind: KindUpstreamList, ReadBy: "aws", Want: "list at least one subnet", Replaces: "replaces the NLB (and its DNS name) unless it only adds subnets in zones the NLB is not in yet"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type", Kind: KindEnum, ReadBy: "aws", Values: []string{"instance", "ip"}, Replaces: "replaces the target groups (not the NLB): targets are re-registered"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-security-groups", Kind: KindIDs, ReadBy: "aws", Format: AWSSecurityGroupID},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-extra-security-groups", Kind: KindIDs, ReadBy: "aws", Format: AWSSecurityGroupID},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-manage-backend-security-group-rules", Kind: KindBool, ReadBy: "aws"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-ssl-cert", Kind: KindID, ReadBy: "aws", Format: AWSCertificateARN},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-ssl-ports", Kind: KindListOrStar, ReadBy: "aws"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy", Kind: KindString, ReadBy: "aws"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-backend-protocol", Kind: KindEnumFold, ReadBy: "aws", Values: []string{"tcp", "ssl", "http", "https"}, Replaces: "replaces the TLS ports' target groups (not the NLB) when it switches between ssl and the others"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-eip-allocations", Kind: KindIDs, ReadBy: "aws", Format: AWSEIPAllocationID, Replaces: "is not applied to a running NLB (AWS cannot change its addresses): only a new NLB gets them"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-private-ipv4-addresses", Kind: KindIPv4s, ReadBy: "aws", Replaces: "is not applied to a running NLB (AWS cannot change its addresses): only a new NLB gets them"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-ip-address-type", Kind: KindEnum, ReadBy: "aws", Values: []string{"ipv4", "dualstack"}},
	{Name: AWSHealthCheckProtocol, Kind: KindEnumFold, ReadBy: "aws", Values: []string{"TCP", "HTTP", "HTTPS"}},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-port", Kind: KindPort, ReadBy: "aws"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-path", Kind: KindHTTPPath, ReadBy: "aws", MaxLen: 1024, HTTPHealthCheckOnly: true},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval", Kind: KindInt, ReadBy: "aws", Min: 5, Max: 300},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-timeout", Kind: KindInt, ReadBy: "aws", Min: 2, Max: 120},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-healthy-threshold", Kind: KindInt, ReadBy: "aws", Min: 2, Max: 10},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-unhealthy-threshold", Kind: KindInt, ReadBy: "aws", Min: 2, Max: 10},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes", Kind: KindMap, ReadBy: "aws"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-proxy-protocol", Kind: KindStar, ReadBy: "aws"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-attributes", Kind: KindMap, ReadBy: "aws"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled", Kind: KindEnum, ReadBy: "aws", Values: []string{"true", "false"}, Trimmed: true},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-access-log-enabled", Kind: KindEnum, ReadBy: "aws", Values: []string{"true", "false"}, Trimmed: true},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-access-log-s3-bucket-name", Kind: KindUnchecked, ReadBy: "aws"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-access-log-s3-bucket-prefix", Kind: KindUnchecked, ReadBy: "aws"},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags", Kind: KindPairs, ReadBy: "aws",
		Values: []string{"kubernetes.io/service-name", "multicloud-ccm.io/backend"}, Prefixes: []string{"kubernetes.io/cluster/", "aws:"}},
	{Name: "service.beta.kubernetes.io/aws-load-balancer-target-node-labels", Kind: KindPairs, ReadBy: "aws"},

	{Name: "service.beta.kubernetes.io/openstack-internal-load-balancer", Kind: KindBool, ReadBy: "openstack", Replaces: "releases or allocates the floating IP: the Service's external address changes"},
	{Name: "loadbalancer.openstack.org/floating-network-id", Kind: KindID, ReadBy: "openstack", Format: openstackID("`openstack network list`")},
	{Name: "loadbalancer.openstack.org/floating-subnet-id", Kind: KindID, ReadBy: "openstack", Format: openstackID("`openstack subnet list --network <floating network>`")},
	{Name: "loadbalancer.openstack.org/floating-subnet", Kind: KindString, ReadBy: "openstack"},
	{Name: "loadbalancer.openstack.org/floating-subnet-tags", Kind: KindString, ReadBy: "openstack"},
	{Name: "loadbalancer.openstack.org/class", Kind: KindString, ReadBy: "openstack"},
	{Name: "loadbalancer.openstack.org/keep-floatingip", Kind: KindBool, ReadBy: "openstack"},
	{Name: "loadbalancer.openstack.org/subnet-id", Kind: KindID, ReadBy: "openstack", Format: openstackID("`openstack subnet list`"), Replaces: readAtCreationOS},
	{Name: "loadbalancer.openstack.org/network-id", Kind: KindID, ReadBy: "openstack", Format: openstackID("`openstack network list`"), Replaces: readAtCreationOS},
	{Name: "loadbalancer.openstack.org/port-id", Kind: KindID, ReadBy: "openstack", Format: openstackID("`openstack port list`"), Replaces: readAtCreationOS},
	{Name: "loadbalancer.openstack.org/member-subnet-id", Kind: KindID, ReadBy: "openstack", Format: openstackID("`openstack subnet list`")},
	{Name: "loadbalancer.openstack.org/flavor-id", Kind: KindID, ReadBy: "openstack", Format: openstackID("`openstack loadbalancer flavor list`"), Replaces: readAtCreationOS},
	{Name: "loadbalancer.openstack.org/availability-zone", Kind: KindString, ReadBy: "openstack", MaxLen: 255,
		Want: "must be the name of an Octavia availability zone (at most 255 characters; `openstack loadbalancer availabilityzone list`)", Replaces: readAtCreationOS},
	{Name: "loadbalancer.openstack.org/lb-method", Kind: KindEnum, ReadBy: "openstack", Values: []string{"ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT"}},
	{Name: "loadbalancer.openstack.org/connection-limit", Kind: KindInt, ReadBy: "openstack", Min: -1, Max: AnyInt, Except: 0, ExceptSet: true,
		Want: "must be a positive whole number, or -1 for no limit"},
	{Name: "loadbalancer.openstack.org/timeout-client-data", Kind: KindInt, ReadBy: "openstack", Min: 0, Max: 86400000},
	{Name: "loadbalancer.openstack.org/timeout-member-connect", Kind: KindInt, ReadBy: "openstack", Min: 0, Max: 86400000},
	{Name: "loadbalancer.openstack.org/timeout-member-data", Kind: KindInt, ReadBy: "openstack", Min: 0, Max: 86400000},
	{Name: "loadbalancer.openstack.org/timeout-tcp-inspect", Kind: KindInt, ReadBy: "openstack", Min: 0, Max: 86400000},
	{Name: "loadbalancer.openstack.org/proxy-protocol", Kind: KindEnum, ReadBy: "openstack", Values: []string{"true", "v1", "v2", "false"}, Replaces: "replaces the pools (a pool's protocol cannot change): members are re-added"},
	{Name: "loadbalancer.openstack.org/x-forwarded-for", Kind: KindBool, ReadBy: "openstack", Replaces: "replaces the listeners (TCP to HTTP or back)"},
	{Name: "loadbalancer.openstack.org/default-tls-container-ref", Kind: KindString, ReadBy: "openstack", Replaces: "replaces the listeners when TLS is turned on or off"},
	{Name: "loadbalancer.openstack.org/enable-health-monitor", Kind: KindBool, ReadBy: "openstack"},
	{Name: "loadbalancer.openstack.org/health-monitor-delay", Kind: KindInt, ReadBy: "openstack", Min: 1, Max: 3600},
	{Name: "loadbalancer.openstack.org/health-monitor-timeout", Kind: KindInt, ReadBy: "openstack", Min: 1, Max: 3600},
	{Name: "loadbalancer.openstack.org/health-monitor-max-retries", Kind: KindInt, ReadBy: "openstack", Min: 1, Max: 10},
	{Name: "loadbalancer.openstack.org/health-monitor-max-retries-down", Kind: KindInt, ReadBy: "openstack", Min: 1, Max: 10},
	{Name: "loadbalancer.openstack.org/node-selector", Kind: KindLabelSelector, ReadBy: "openstack"},
	{Name: "loadbalancer.openstack.org/load-balancer-id", Kind: KindID, ReadBy: "openstack", Format: openstackID("`openstack loadbalancer list`"), WrittenBack: true,
		Replaces: "moves the Service to another Octavia load balancer (or shares one); do not change it on a live Service"},
	{Name: "loadbalancer.openstack.org/load-balancer-address", Kind: KindUnchecked, ReadBy: "openstack"},
	{Name: "loadbalancer.openstack.org/hostname", Kind: KindDNSName, ReadBy: "openstack"},

	// Appended, not grouped with the router's: the admission policy's
	// variables are numbered by registry index.
	{Name: LoadBalancerDNSTarget, Kind: KindUnchecked, ReadBy: "router"},
	{Name: LoadBalancerRecordClass, Kind: KindUnchecked, ReadBy: "router"},
}

// AWSHealthCheckProtocol is the AWS backend's health-check protocol
// annotation, which decides whether HTTPHealthCheckOnly values are read.
const AWSHealthCheckProtocol Name = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol"

// HTTPHealthCheck reports whether a Service with these annotations and
// externalTrafficPolicy (local: Local) gets an HTTP or HTTPS health check
// from the AWS backend: AWSHealthCheckProtocol's value when it is a good
// one, else HTTP with externalTrafficPolicy Local and TCP without.
func HTTPHealthCheck(annotations map[string]string, local bool) bool {
	if v, ok := AWSHealthCheckProtocol.Get(annotations); ok {
		for _, p := range []string{"TCP", "HTTP", "HTTPS"} {
			if strings.EqualFold(strings.TrimSpace(v), p) {
				return p != "TCP"
			}
		}
	}
	return local
}

// Readers are the readers ReadBy names: "router", or backend types.
func (s Spec) Readers() []string { return strings.Split(s.ReadBy, ",") }

// Lookup returns the registry's spec of n.
func Lookup(n Name) (Spec, bool) {
	for _, s := range Registry {
		if s.Name == n {
			return s, true
		}
	}
	return Spec{}, false
}

// Describe says in a sentence what values the kind takes, for
// docs/annotations.md.
func (s Spec) Describe() string {
	switch s.Kind {
	case KindInt:
		if s.Want != "" {
			return s.Want[len("must be "):] + "."
		}
		return fmt.Sprintf("a whole number from %d to %d (white space around it ignored; a sign and leading zeros allowed: `0300` is 300).", s.Min, s.Max)
	case KindEnum, KindEnumFold:
		how := "exactly as written"
		switch {
		case s.Kind == KindEnumFold:
			how = "in any case"
		case !s.Exact:
			how = "case-sensitive, white space around it ignored"
		}
		return fmt.Sprintf("one of `%s` (%s).", strings.Join(s.Values, "`, `"), how)
	case KindID:
		return fmt.Sprintf("an ID like `%s`.", s.Format.Example)
	case KindIDs:
		return fmt.Sprintf("comma-separated IDs like `%s`, none twice.", s.Format.Example)
	case KindString:
		if s.MaxLen > 0 {
			return fmt.Sprintf("a non-empty string of at most %d bytes.", s.MaxLen)
		}
	case KindIPList:
		if s.Hostnames {
			return "comma-separated IP addresses (at most one per family) or DNS names, which kube-vip resolves (empty: none). Where a bare-metal backend has `announce: kube-vip`, a value the user wrote is that backend's request and is checked as it reads it: one usable address per IP family, no name, not empty, not `0.0.0.0` or `::` (kube-vip's DHCP), not loopback, multicast or link-local."
		}
	case KindHTTPPath:
		return fmt.Sprintf("a path starting with `/`, at most %d characters, without white space; read (and checked) only for HTTP and HTTPS health checks.", s.MaxLen)
	}
	return kindText[s.Kind]
}

// kindText describes the kinds without parameters.
var kindText = map[Kind]string{
	KindBackends:        "a backend name, or several separated by commas (`metal,aws`; white space around each ignored, empty entries dropped), each a configured backend with load balancers, none twice.",
	KindDuration:        "a duration such as `5m`, `90s` or `1h30m` (Go's syntax), not negative; `0` is none.",
	KindString:          "a non-empty string (white space around it ignored).",
	KindBool:            "`true` or `false`, lower case (`False`, `0`, `yes` are refused).",
	KindAWSInternal:     "`true` or `false` as the upstream provider reads it: `false` or empty is internet-facing; `true`, `1`, `t`, `T`, `TRUE`, `True` and `0.0.0.0/0` are internal; other spellings of false (`False`, `0`) are refused.",
	KindList:            "a comma-separated list of non-empty entries.",
	KindListOrStar:      "`*`, or a comma-separated list of non-empty entries.",
	KindUpstreamList:    "a comma-separated list (empty entries skipped) of at least one entry.",
	KindMap:             "comma-separated `key=value` pairs, keys non-empty and unique (which keys and values are allowed is checked by the backend).",
	KindPairs:           "comma-separated `Key=Value`, `Key=` or `Key` (empty entries skipped).",
	KindLoadBalancerIPs: "comma-separated IP addresses, at most one IPv4 and one IPv6; no zone, no IPv4-mapped IPv6, not unspecified, loopback, multicast or link-local.",
	KindIPList:          "comma-separated IP addresses, at most one per family (empty: none).",
	KindIPv4s:           "comma-separated IPv4 addresses.",
	KindSharingKey:      "a key of 1 to 253 bytes of letters, digits, punctuation and symbols (no white space).",
	KindPort:            "`traffic-port` or a port number from 1 to 65535.",
	KindStar:            "`*`.",
	KindDNSName:         "a DNS name (RFC 1123 subdomain), e.g. `lb.example.com`.",
	KindLabelSelector:   "comma-separated label keys or `key=value`, e.g. `env=production, gpu`.",
	KindUnchecked:       "not checked at admission.",
}

package aws

import "github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"

// Service annotations the AWS backend reads. Where the upstream AWS
// provider or the AWS Load Balancer Controller has an annotation with the
// same meaning, its name is used. They are listed in docs/aws.md.
const (
	// AnnotationScheme (string: internal or internet-facing, default
	// internet-facing) chooses the NLB's scheme, as AnnotationInternal
	// does; when both are set they must agree (the upstream provider reads
	// only AnnotationInternal). Changing it replaces the NLB (and its DNS name),
	// announced first by a Warning event LoadBalancerReplacing.
	AnnotationScheme annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-scheme"

	// AnnotationInternal (bool "true"/"false", or the upstream "0.0.0.0/0"
	// meaning true; default false) makes the NLB internal, as with the
	// upstream AWS provider. Since upstream makes it internal for any value
	// but "false", other spellings of false ("False", "0") are refused.
	// Changing it replaces the NLB (and its DNS name), announced first by a
	// Warning event LoadBalancerReplacing.
	AnnotationInternal annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-internal"

	// AnnotationSubnets (comma-separated subnet IDs or Name tags, at most one
	// per zone; default: the config's subnets, else the subnets tagged
	// kubernetes.io/role/elb or kubernetes.io/role/internal-elb) places the
	// NLB. Subnets in zones the NLB is not in yet are added in place; any
	// other change of it replaces the NLB (and its DNS name), announced
	// first by a Warning event LoadBalancerReplacing. Only this
	// annotation ever replaces an NLB for its subnets: a change of the
	// config's subnets or of the discovered ones never does (a Warning
	// event LoadBalancerSubnetsKept instead).
	AnnotationSubnets annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-subnets"

	// AnnotationTargetType (string: instance or ip; default: instance when
	// every node handed to the backend is an instance of its VPC, else ip)
	// chooses the target type. With instance, only the backend's own
	// instances are targets; with ip, every node with an IPv4 InternalIP is,
	// by that address, at the Service's NodePort. Changing it replaces the
	// target groups (AWS cannot change a group's target type), not the
	// NLB, announced first by a Normal event
	// LoadBalancerTargetGroupsReplacing.
	AnnotationTargetType annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"

	// AnnotationSecurityGroups (comma-separated security-group IDs of the
	// VPC; default none: the backend makes one, k8s-elb-<load balancer
	// name>, allowing the listener ports from loadBalancerSourceRanges)
	// brings your own security groups for the NLB, as the upstream provider
	// and the AWS Load Balancer Controller take them: they replace the
	// backend's, which it then neither creates nor keeps, and the backend
	// never changes or deletes them. Changed in place (SetSecurityGroups);
	// an NLB made without security groups (by the upstream provider) cannot
	// get any, so there it has no effect.
	AnnotationSecurityGroups annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-security-groups"

	// AnnotationExtraSecurityGroups (comma-separated security-group IDs of
	// the VPC; default none) adds your security groups to the NLB beside
	// the backend's own (or beside AnnotationSecurityGroups'). The backend
	// never changes or deletes them. Changed in place (SetSecurityGroups).
	AnnotationExtraSecurityGroups annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-extra-security-groups"

	// AnnotationManageBackendSGRules (bool; default true, false with
	// AnnotationSecurityGroups), the AWS Load Balancer Controller's name,
	// says whether the backend adds ingress rules to the target
	// instances' security groups allowing the NodePorts (and a numeric
	// health-check port) from the NLB's backend security group — the
	// backend's own, which it also attaches beside yours when you bring
	// your own. It applies to instance targets (IP targets' security groups
	// are outside the backend's reach). Rules it added are removed when a
	// port, an instance or the Service goes, or when this turns false.
	AnnotationManageBackendSGRules annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-manage-backend-security-group-rules"

	// AnnotationSSLCert (an ACM or IAM certificate ARN; default none) makes
	// the NLB terminate TLS: the TCP ports AnnotationSSLPorts lists (all
	// by default) get TLS listeners with this certificate, as with the
	// upstream provider. Changed in place (ModifyListener).
	AnnotationSSLCert annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"

	// AnnotationSSLPorts (comma-separated Service port numbers or names, or
	// "*"; default "*": every TCP port) chooses the ports that get TLS
	// listeners when AnnotationSSLCert is set. Each must be a TCP port of
	// the Service (not one it also serves over UDP). Changed in place.
	AnnotationSSLPorts annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-ssl-ports"

	// AnnotationSSLNegotiationPolicy (an ELBv2 security policy name;
	// default ELBSecurityPolicy-2016-08, AWS's default for listeners made
	// through its API) is the TLS listeners' security policy. Checked with
	// DescribeSSLPolicies before anything changes; changed in place.
	AnnotationSSLNegotiationPolicy annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy"

	// AnnotationBackendProtocol (tcp, ssl, http or https, any case; default
	// tcp) is the protocol between the NLB and the targets behind TLS
	// listeners, as with the upstream provider: ssl makes TLS target
	// groups (the NLB re-encrypts); the others make TCP target groups (an
	// NLB has no HTTP listeners). Changing it replaces the TLS ports'
	// target groups (AWS cannot change a target group's protocol), not the
	// NLB, announced first by a Normal event
	// LoadBalancerTargetGroupsReplacing.
	AnnotationBackendProtocol annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-backend-protocol"

	// AnnotationEIPAllocations (comma-separated Elastic IP allocation IDs,
	// one per subnet of the NLB, matched to its subnets in ID order;
	// internet-facing only; default none: AWS's addresses), the upstream
	// provider's name, gives a new NLB static public addresses. AWS cannot
	// change an NLB's addresses: on a running NLB a change is not applied
	// (as upstream) and a Warning event LoadBalancerAddressesKept says so
	// and how to get a new NLB.
	AnnotationEIPAllocations annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-eip-allocations"

	// AnnotationPrivateIPv4Addresses (comma-separated IPv4 addresses, one
	// in each subnet of the NLB; internal only; default none: AWS's
	// choice), the upstream provider's name, gives a new internal NLB
	// static private addresses. Like AnnotationEIPAllocations, fixed when
	// the NLB is created (a change is a LoadBalancerAddressesKept warning).
	AnnotationPrivateIPv4Addresses annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-private-ipv4-addresses"

	// AnnotationIPAddressType (ipv4 or dualstack; default ipv4), the AWS
	// Load Balancer Controller's name, makes the NLB dual-stack (IPv4 and
	// IPv6 clients on every listener; its subnets need IPv6 CIDRs). Changed
	// in place (SetIpAddressType): same NLB, same DNS name. The target
	// groups are of the Service's primary IP family (spec.ipFamilies[0]):
	// an IPv6-primary Service gets IPv6 target groups with the nodes' IPv6
	// addresses, which AWS attaches only to a dualstack NLB, so it needs
	// this annotation set to dualstack.
	AnnotationIPAddressType annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-ip-address-type"

	// AnnotationType (string: nlb, external or nlb-ip; default: nlb) is
	// the upstream AWS provider's load-balancer type. This backend makes
	// Network Load Balancers only, so nlb and no annotation are the same.
	// external and nlb-ip mean the AWS Load Balancer Controller (or
	// someone else) manages the Service's load balancer: the backend answers
	// ImplementedElsewhere and creates, changes and deletes nothing in AWS,
	// not even a load balancer it made before the annotation was set (as
	// upstream, which leaves it to be cleaned up by hand).
	AnnotationType annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-type"

	// AnnotationHealthCheckProtocol (string: TCP, HTTP or HTTPS, any case;
	// default TCP, or HTTP with externalTrafficPolicy Local) is the target
	// groups' health-check protocol. Changed in place.
	AnnotationHealthCheckProtocol annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol"

	// AnnotationHealthCheckPort (traffic-port or 1-65535; default
	// traffic-port, or the Service's healthCheckNodePort with
	// externalTrafficPolicy Local) is the port health checks go to.
	// Changed in place.
	AnnotationHealthCheckPort annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-port"

	// AnnotationHealthCheckPath (string starting with /, at most 1024
	// characters; default /, or /healthz with externalTrafficPolicy Local)
	// is the HTTP or HTTPS health checks' path. Ignored for TCP checks.
	// Changed in place.
	AnnotationHealthCheckPath annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-path"

	// AnnotationHealthCheckInterval (whole seconds, 5-300; default 30, or
	// 10 with externalTrafficPolicy Local, as upstream) is the time between
	// health checks of a target. Changed in place.
	AnnotationHealthCheckInterval annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval"

	// AnnotationHealthCheckTimeout (whole seconds, 2-120 and not longer
	// than the interval; default 10, or 6 for HTTP checks) is how long a
	// health check may take. Changed in place.
	AnnotationHealthCheckTimeout annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-timeout"

	// AnnotationHealthyThreshold (2-10; default 3, or 2 with
	// externalTrafficPolicy Local, as upstream) is how many health checks
	// in a row must pass before a target takes traffic. Changed in place.
	AnnotationHealthyThreshold annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-healthy-threshold"

	// AnnotationUnhealthyThreshold (2-10; default 3, or 2 with
	// externalTrafficPolicy Local, as upstream) is how many health
	// checks in a row must fail before a target stops taking traffic.
	// Changed in place.
	AnnotationUnhealthyThreshold annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-unhealthy-threshold"

	// AnnotationTargetGroupAttributes (comma-separated key=value; default
	// none) sets attributes of every target group of the Service:
	// preserve_client_ip.enabled (true or false; default true for instance
	// targets and UDP, false for IP targets; false is refused with UDP
	// ports), proxy_protocol_v2.enabled (true or false; default false),
	// deregistration_delay.timeout_seconds (0-3600; default 300),
	// deregistration_delay.connection_termination.enabled (true or false;
	// default false), stickiness.enabled (true or false; default false),
	// stickiness.type (source_ip) and load_balancing.cross_zone.enabled
	// (true, false or use_load_balancer_configuration, the default).
	// Changed in place; an attribute no longer listed goes back to its
	// default.
	AnnotationTargetGroupAttributes annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"

	// AnnotationProxyProtocol (string: "*"; default none) turns on proxy
	// protocol v2 on every target group of the Service, as the upstream
	// provider's annotation does on its load balancers; the same as
	// proxy_protocol_v2.enabled=true in AnnotationTargetGroupAttributes.
	// Changed in place.
	AnnotationProxyProtocol annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-proxy-protocol"

	// AnnotationAttributes (comma-separated key=value; default none), the
	// AWS Load Balancer Controller's name, sets attributes of the NLB:
	// deletion_protection.enabled (true or false; default false; while true
	// the NLB cannot be deleted or replaced, so deleting the Service waits
	// until it is set back to false),
	// load_balancing.cross_zone.enabled (true or false; default false),
	// access_logs.s3.enabled (true or false; default false),
	// access_logs.s3.bucket and access_logs.s3.prefix (strings; a bucket is
	// needed while access logs are on) and dns_record.client_routing_policy
	// (any_availability_zone, the default, availability_zone_affinity or
	// partial_availability_zone_affinity). Changed in place; an attribute
	// no longer set goes back to its default.
	AnnotationAttributes annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-attributes"

	// AnnotationCrossZone (bool; default false), the upstream provider's
	// name, sets load_balancing.cross_zone.enabled. Changed in place.
	AnnotationCrossZone annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled"

	// AnnotationAccessLogEnabled (bool; default false), the upstream
	// provider's name, sets access_logs.s3.enabled; it needs
	// AnnotationAccessLogBucket. Changed in place.
	AnnotationAccessLogEnabled annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-access-log-enabled"

	// AnnotationAccessLogBucket (S3 bucket name; default none), the
	// upstream provider's name, sets access_logs.s3.bucket. Changed in place.
	AnnotationAccessLogBucket annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-access-log-s3-bucket-name"

	// AnnotationAccessLogPrefix (string; default none), the upstream
	// provider's name, sets access_logs.s3.prefix. Changed in place.
	AnnotationAccessLogPrefix annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-access-log-s3-bucket-prefix"

	// AnnotationAdditionalTags (comma-separated Key=Value, Key= or Key;
	// default none) adds tags to everything the backend creates for the
	// Service: the NLB, its listeners, its target groups and its security
	// group (the upstream provider tags its NLB, listeners and groups).
	// Tags added or changed later are put on all of them in place (one
	// AddTags for the listeners and target groups, one CreateTags for the
	// security group, one AddTags for the NLB; the upstream provider tags
	// only the NLB); a tag removed from the annotation stays where it was
	// put. The backend's own tags
	// (kubernetes.io/cluster/..., kubernetes.io/service-name,
	// multicloud-ccm.io/backend) cannot be set.
	AnnotationAdditionalTags annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"

	// AnnotationTargetNodeLabels (comma-separated key=value, key= or key;
	// default none: every node) makes only the nodes carrying every listed
	// label (any value for key or key=) targets. Changed in place
	// (RegisterTargets / DeregisterTargets).
	AnnotationTargetNodeLabels annotation.Name = "service.beta.kubernetes.io/aws-load-balancer-target-node-labels"
)

// Values of AnnotationType.
const (
	typeNLB      = "nlb"
	typeExternal = "external"
	typeNLBIP    = "nlb-ip"
)

// Tags the backend puts on everything it creates.
const (
	// tagClusterPrefix + clusterID = "owned" marks the cluster's resources,
	// as the upstream AWS provider does.
	tagClusterPrefix = "kubernetes.io/cluster/"
	// tagService = "<namespace>/<name>" names the Service.
	tagService = "kubernetes.io/service-name"
	// tagBackend = the backend's name in the cloud-config.
	tagBackend = "multicloud-ccm.io/backend"
	// tagRoleELB and tagRoleInternalELB mark subnets for internet-facing and
	// internal load balancers.
	tagRoleELB         = "kubernetes.io/role/elb"
	tagRoleInternalELB = "kubernetes.io/role/internal-elb"
)

// Target types.
const (
	targetInstance = "instance"
	targetIP       = "ip"
)

// Schemes.
const (
	schemeInternal       = "internal"
	schemeInternetFacing = "internet-facing"
)

// Event reasons of user-fixable problems.
const (
	reasonInvalidService = "InvalidLoadBalancerService"
	reasonNameConflict   = "LoadBalancerNameConflict"
	reasonNoSubnets      = "NoLoadBalancerSubnets"
	// reasonSubnetsKept: the config's or the discovered subnets changed in
	// a way the running NLB cannot take in place (another subnet in one of
	// its zones, or a zone dropped); the NLB is kept where it is.
	reasonSubnetsKept = "LoadBalancerSubnetsKept"
	// reasonAddressesKept: the Service asks for Elastic IPs or private
	// addresses the running NLB was made without; AWS cannot change them,
	// so the NLB keeps its addresses.
	reasonAddressesKept = "LoadBalancerAddressesKept"
	// reasonDeletionProtected: the Service is being deleted (or moved) but
	// asks for deletion protection on its NLB, which is kept.
	reasonDeletionProtected = "LoadBalancerDeletionProtected"
	// reasonSGRulesQuota: a target instance's security group, or the
	// NLB's own, has reached the account's "Inbound or outbound rules per
	// security group" quota, so the rules the Service needs there (its
	// NodePorts; its listener ports × source ranges) cannot be added.
	reasonSGRulesQuota = "SecurityGroupRulesQuotaExceeded"
)

package aws

// Service annotations the AWS backend reads. Where the upstream AWS
// provider or the AWS Load Balancer Controller has an annotation with the
// same meaning, its name is used. They are listed in docs/aws.md.
const (
	// AnnotationScheme (string: internal or internet-facing, default
	// internet-facing) chooses the NLB's scheme. It takes precedence over
	// AnnotationInternal. Changing it replaces the NLB (and its DNS name).
	AnnotationScheme = "service.beta.kubernetes.io/aws-load-balancer-scheme"

	// AnnotationInternal (bool "true"/"false", or the upstream "0.0.0.0/0"
	// meaning true; default false) makes the NLB internal, as with the
	// upstream AWS provider.
	AnnotationInternal = "service.beta.kubernetes.io/aws-load-balancer-internal"

	// AnnotationSubnets (comma-separated subnet IDs or Name tags, at most one
	// per zone; default: the config's subnets, else the subnets tagged
	// kubernetes.io/role/elb or kubernetes.io/role/internal-elb) places the
	// NLB. Subnets in zones the NLB is not in yet are added in place; any
	// other change of it replaces the NLB (and its DNS name). Only this
	// annotation ever replaces an NLB for its subnets: a change of the
	// config's subnets or of the discovered ones never does (a Warning
	// event LoadBalancerSubnetsKept instead).
	AnnotationSubnets = "service.beta.kubernetes.io/aws-load-balancer-subnets"

	// AnnotationTargetType (string: instance or ip; default: instance when
	// every node handed to the backend is an instance of its VPC, else ip)
	// chooses the target type. With instance, only the backend's own
	// instances are targets; with ip, every node with an IPv4 InternalIP is,
	// by that address, at the Service's NodePort.
	AnnotationTargetType = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"
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
	reasonInvalidAnnotation = "InvalidLoadBalancerAnnotation"
	reasonInvalidService    = "InvalidLoadBalancerService"
	reasonNameConflict      = "LoadBalancerNameConflict"
	reasonNoSubnets         = "NoLoadBalancerSubnets"
	// reasonSubnetsKept: the config's or the discovered subnets changed in
	// a way the running NLB cannot take in place (another subnet in one of
	// its zones, or a zone dropped); the NLB is kept where it is.
	reasonSubnetsKept = "LoadBalancerSubnetsKept"
)

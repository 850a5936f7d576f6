package aws

import (
	"fmt"
	"net/url"
	"regexp"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// Defaults of the aws section.
const (
	defaultInstanceCacheTTL = time.Minute
	defaultMaxAttempts      = 8
	defaultMaxBackoff       = 20 * time.Second
)

// Settings is the aws section of a backend in the cloud-config file.
type Settings struct {
	// Region is the AWS region, e.g. eu-west-1. Required.
	Region string `json:"region"`
	// VPC is the ID of the VPC the cluster's load balancers and instances
	// live in. Required.
	VPC string `json:"vpc"`
	// Subnets are the subnet IDs load balancers are placed in (one per
	// zone). Empty: discovered from the kubernetes.io/role/elb (internet
	// facing) and kubernetes.io/role/internal-elb (internal) tags, preferring
	// subnets tagged kubernetes.io/cluster/<clusterID>.
	Subnets []string `json:"subnets,omitempty"`
	// Profile is a profile of the shared config and credentials files.
	Profile string `json:"profile,omitempty"`
	// Credentials are static credentials. Empty: the SDK's default chain
	// (environment, shared files, web identity / IRSA, and, only with
	// useInstanceMetadata, the instance profile).
	Credentials *StaticCredentials `json:"credentials,omitempty"`
	// AssumeRole makes the backend assume an IAM role with the credentials
	// above.
	AssumeRole *AssumeRole `json:"assumeRole,omitempty"`
	// Endpoints override the service endpoints (private endpoints, tests).
	Endpoints Endpoints `json:"endpoints,omitempty"`
	// UseInstanceMetadata allows the SDK to use the EC2 instance metadata
	// service (for the instance-profile credentials). Default false.
	UseInstanceMetadata bool `json:"useInstanceMetadata,omitempty"`
	// Routes, when set, makes the backend program pod-CIDR routes.
	Routes *RoutesSettings `json:"routes,omitempty"`
	// InstanceCacheTTL is how long a bulk listing of instances serves
	// lookups before it is refreshed. Default 1m.
	InstanceCacheTTL *metav1.Duration `json:"instanceCacheTTL,omitempty"`
	// Retry tunes retries of throttled and failed calls.
	Retry RetrySettings `json:"retry,omitempty"`
	// RateLimits are the client-side API budgets, by API (ec2, elbv2): qps
	// and bucket for reads, qpsWrite and bucketWrite for mutations, each
	// bucket's where AWS keeps one per action (EC2, ELBv2's mutations). On
	// by default: each field left out (or 0) takes AWS's documented bucket
	// as an adaptive ceiling (cloudapi.AWSDefaults); qps or qpsWrite -1
	// turns that bucket off (docs/aws.md, "API budget").
	RateLimits map[string]cloudapi.RateLimit `json:"rateLimits,omitempty"`
}

// StaticCredentials are an access key, read from files or the environment.
type StaticCredentials struct {
	// AccessKeyID is the access key ID.
	AccessKeyID config.SecretRef `json:"accessKeyID"`
	// SecretAccessKey is the secret access key.
	SecretAccessKey config.SecretRef `json:"secretAccessKey"`
	// SessionToken is an optional session token.
	SessionToken config.SecretRef `json:"sessionToken,omitempty"`
}

// AssumeRole names the IAM role to assume.
type AssumeRole struct {
	// RoleARN is the role's ARN. Required.
	RoleARN string `json:"roleARN"`
	// ExternalID is the external ID the role's trust policy requires.
	ExternalID string `json:"externalID,omitempty"`
	// SessionName names the session. Default multicloud-ccm.
	SessionName string `json:"sessionName,omitempty"`
}

// Endpoints override service endpoints. Each is an absolute http(s) URL.
type Endpoints struct {
	// EC2 is the EC2 endpoint.
	EC2 string `json:"ec2,omitempty"`
	// ELBv2 is the Elastic Load Balancing v2 endpoint.
	ELBv2 string `json:"elbv2,omitempty"`
	// STS is the STS endpoint (used with assumeRole).
	STS string `json:"sts,omitempty"`
}

// RoutesSettings configures pod-CIDR routes.
type RoutesSettings struct {
	// RouteTableID is the route table to program. Empty: the VPC's route
	// table tagged kubernetes.io/cluster/<clusterID>.
	RouteTableID string `json:"routeTableID,omitempty"`
}

// RetrySettings tunes the SDK retryer.
type RetrySettings struct {
	// MaxAttempts per call, first included. Default 8.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// MaxBackoff between attempts. Default 20s.
	MaxBackoff *metav1.Duration `json:"maxBackoff,omitempty"`
}

var (
	regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d+$`)
	vpcRE    = regexp.MustCompile(`^vpc-[0-9a-f]+$`)
	subnetRE = regexp.MustCompile(`^subnet-[0-9a-f]+$`)
	rtbRE    = regexp.MustCompile(`^rtb-[0-9a-f]+$`)
	roleRE   = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/.+$`)
)

// ParseSection decodes, defaults and validates an aws section.
func ParseSection(raw []byte, path *field.Path, dir string) (any, field.ErrorList) {
	s := &Settings{}
	errs := config.DecodeSection(raw, path, s)
	s.setDefaults()
	if errs = append(errs, s.Validate(path, dir)...); len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

func (s *Settings) setDefaults() {
	if s.InstanceCacheTTL == nil {
		s.InstanceCacheTTL = &metav1.Duration{Duration: defaultInstanceCacheTTL}
	}
	if s.Retry.MaxAttempts == 0 {
		s.Retry.MaxAttempts = defaultMaxAttempts
	}
	if s.Retry.MaxBackoff == nil {
		s.Retry.MaxBackoff = &metav1.Duration{Duration: defaultMaxBackoff}
	}
	if s.AssumeRole != nil && s.AssumeRole.SessionName == "" {
		s.AssumeRole.SessionName = "multicloud-ccm"
	}
}

// Validate reports every problem of the settings, each naming its field.
// dir resolves relative secret files.
func (s *Settings) Validate(p *field.Path, dir string) field.ErrorList {
	errs := cloudapi.ValidateLimits(s.RateLimits, cloudapi.AWSDefaults, p.Child("rateLimits"))
	if !regionRE.MatchString(s.Region) {
		errs = append(errs, field.Invalid(p.Child("region"), s.Region, "set the AWS region, e.g. eu-west-1"))
	}
	if !vpcRE.MatchString(s.VPC) {
		errs = append(errs, field.Invalid(p.Child("vpc"), s.VPC, "set the ID of the cluster's VPC, e.g. vpc-0a1b2c3d"))
	}
	for i, id := range s.Subnets {
		if !subnetRE.MatchString(id) {
			errs = append(errs, field.Invalid(p.Child("subnets").Index(i), id, "must be a subnet ID, e.g. subnet-0a1b2c3d"))
		}
	}
	errs = append(errs, s.validateCredentials(p, dir)...)
	errs = append(errs, s.Endpoints.validate(p.Child("endpoints"))...)
	if s.Routes != nil && s.Routes.RouteTableID != "" && !rtbRE.MatchString(s.Routes.RouteTableID) {
		errs = append(errs, field.Invalid(p.Child("routes", "routeTableID"), s.Routes.RouteTableID, "must be a route table ID, e.g. rtb-0a1b2c3d, or empty to find the table tagged for the cluster"))
	}
	if s.InstanceCacheTTL != nil && s.InstanceCacheTTL.Duration <= 0 {
		errs = append(errs, field.Invalid(p.Child("instanceCacheTTL"), s.InstanceCacheTTL.Duration.String(), "must be positive, e.g. 1m"))
	}
	if s.Retry.MaxAttempts < 1 {
		errs = append(errs, field.Invalid(p.Child("retry", "maxAttempts"), s.Retry.MaxAttempts, "must be at least 1"))
	}
	if s.Retry.MaxBackoff != nil && s.Retry.MaxBackoff.Duration <= 0 {
		errs = append(errs, field.Invalid(p.Child("retry", "maxBackoff"), s.Retry.MaxBackoff.Duration.String(), "must be positive, e.g. 20s"))
	}
	return errs
}

func (s *Settings) validateCredentials(p *field.Path, dir string) field.ErrorList {
	var errs field.ErrorList
	if c := s.Credentials; c != nil {
		cp := p.Child("credentials")
		errs = append(errs, c.AccessKeyID.Validate(cp.Child("accessKeyID"), dir, true)...)
		errs = append(errs, c.SecretAccessKey.Validate(cp.Child("secretAccessKey"), dir, true)...)
		errs = append(errs, c.SessionToken.Validate(cp.Child("sessionToken"), dir, false)...)
		if s.Profile != "" {
			errs = append(errs, field.Forbidden(p.Child("profile"), "set either profile or credentials, not both"))
		}
	}
	if r := s.AssumeRole; r != nil && !roleRE.MatchString(r.RoleARN) {
		errs = append(errs, field.Invalid(p.Child("assumeRole", "roleARN"), r.RoleARN, "must be an IAM role ARN, e.g. arn:aws:iam::123456789012:role/ccm"))
	}
	return errs
}

func (e Endpoints) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, ep := range []struct{ name, v string }{{"ec2", e.EC2}, {"elbv2", e.ELBv2}, {"sts", e.STS}} {
		name, v := ep.name, ep.v
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, field.Invalid(p.Child(name), v, fmt.Sprintf("must be an absolute http(s) URL, e.g. https://%s.eu-west-1.amazonaws.com", name)))
		}
	}
	return errs
}

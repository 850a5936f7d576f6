// Package aws is the backend for Amazon EC2 instances and Network Load
// Balancers.
//
// Instances: a Node is the EC2 instance named by its providerID
// (aws:///<zone>/<instance-id>, as the upstream AWS provider writes it, and
// its other accepted forms) or, before it has one, found by node name
// (i-…), private DNS name or private IP address. Lookups are served from a
// cache filled by bulk, paginated DescribeInstances calls filtered to the
// VPC, merged with singleflight. An instance absent from the listing is
// confirmed gone with a direct lookup before InstanceExists answers false.
//
// Load balancers: one NLB per Service with, per port, a target group and a
// listener, and a security group enforcing loadBalancerSourceRanges. Nodes
// that are this backend's instances are instance targets; every other node
// (vSphere, bare metal, other clouds linked to the VPC) is an IP target at
// its NodePort. Everything is named deterministically from the cluster ID
// and the Service and tagged with both, so a restart finds what an earlier
// run created. See docs/aws.md.
package aws

import (
	"context"
	"fmt"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws/awsid"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

const (
	// Type is the backend type in the cloud-config file.
	Type = "aws"
	// Scheme is the providerID scheme of EC2 nodes, as in
	// aws:///eu-west-1a/i-0123456789abcdef0 (awsid.Scheme). It never
	// changes: Nodes and CSI drivers rely on it.
	Scheme = awsid.Scheme
	// appID goes into the SDK's User-Agent.
	appID = "multicloud-ccm"
	// httpTimeout bounds one HTTP exchange with AWS.
	httpTimeout = 30 * time.Second
)

func init() {
	backends.Register(backends.Registration{Type: Type, Scheme: Scheme, Parse: ParseSection, New: New, ClassifyError: ClassifyError, CrossValidate: checkBudgetsAcross})
}

var (
	_ cloudprovider.Interface = (*Cloud)(nil)
	_ backends.Factory        = New
)

// Cloud is an AWS backend.
type Cloud struct {
	backends.InstancesV2Only

	name      string
	clusterID string
	settings  *Settings
	// budget is the client-side API budget of the clients New built (nil
	// for clients a test hands newCloud): a reload changing only
	// rateLimits retunes it in place (PrepareRetune).
	budget    *cloudapi.Budget
	instances *Instances
	lb        *LoadBalancer
	routes    *Routes
}

// New builds an AWS backend from its Settings. It makes no AWS call.
func New(ctx context.Context, o backends.Options) (cloudprovider.Interface, error) {
	s, ok := o.Settings.(*Settings)
	if !ok || s == nil {
		return nil, fmt.Errorf("settings are %T, want *aws.Settings", o.Settings)
	}
	budget := cloudapi.NewSharedBudget(o.Name, sharedBudgetKey(s), s.RateLimits, cloudapi.AWSDefaults)
	ec2c, elbc, err := newClients(ctx, s, budget)
	if err != nil {
		return nil, err
	}
	c := newCloud(o.Name, o.ClusterID, s, ec2c, elbc)
	c.budget = budget
	return c, nil
}

// newCloud assembles a backend around its clients.
func newCloud(name, clusterID string, s *Settings, ec2c EC2API, elbc ELBAPI) *Cloud {
	ec2c, elbc = dryRunEC2{ec2c}, dryRunELB{elbc}
	inst := newInstances(name, s, ec2c)
	c := &Cloud{name: name, clusterID: clusterID, settings: s, instances: inst}
	c.lb = newLoadBalancer(name, clusterID, s, ec2c, elbc, inst)
	if s.Routes != nil {
		c.routes = newRoutes(clusterID, s, ec2c, inst)
	}
	return c
}

// newClients builds the EC2 and ELBv2 clients: the default credential
// chain (or static credentials, a profile), an optional assumed role, the
// instance metadata service only when asked for, endpoint overrides, and a
// retryer that backs off on throttling and 5xx answers.
func newClients(ctx context.Context, s *Settings, budget *cloudapi.Budget) (EC2API, ELBAPI, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(s.Region),
		awsconfig.WithAppID(appID),
		awsconfig.WithRetryer(func() awssdk.Retryer { return newRetryer(s.Retry) }),
		awsconfig.WithHTTPClient(httpClient()),
	}
	if !s.UseInstanceMetadata {
		opts = append(opts, awsconfig.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	if s.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(s.Profile))
	}
	if s.Endpoints.STS != "" {
		// Web identity (IRSA) exchanges its token at STS too: through the
		// override, for private endpoints. The call is unsigned.
		client := sts.New(sts.Options{Region: s.Region, BaseEndpoint: endpoint(s.Endpoints.STS), HTTPClient: httpClient(),
			Retryer: newRetryer(s.Retry), AppID: appID})
		opts = append(opts, awsconfig.WithWebIdentityRoleCredentialOptions(func(o *stscreds.WebIdentityRoleOptions) { o.Client = client }))
	}
	if s.Credentials != nil {
		p, err := staticCredentials(s.Credentials)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, awsconfig.WithCredentialsProvider(p))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if r := s.AssumeRole; r != nil {
		cfg.Credentials = assumeRole(cfg, s.Endpoints.STS, r)
	}
	ec2c := ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		o.BaseEndpoint = endpoint(s.Endpoints.EC2)
		o.APIOptions = append(o.APIOptions, dryRunGuard("ec2"), cloudapi.AWSAPIOptions(budget, isThrottle))
	})
	elbc := elbv2.NewFromConfig(cfg, func(o *elbv2.Options) {
		o.BaseEndpoint = endpoint(s.Endpoints.ELBv2)
		o.APIOptions = append(o.APIOptions, dryRunGuard("elasticloadbalancing"), cloudapi.AWSAPIOptions(budget, isThrottle))
	})
	return ec2c, elbc, nil
}

// httpClient is the SDK's buildable client (it honours AWS_CA_BUNDLE and
// proxies) with a timeout on each exchange.
func httpClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTimeout(httpTimeout)
}

func endpoint(u string) *string {
	if u == "" {
		return nil
	}
	return awssdk.String(u)
}

// newRetryer retries throttling, 5xx and transient network errors with
// exponential backoff and jitter. The client-side retry quota is off: a
// throttling storm must slow the backend down, not make it give up early;
// the caller's deadline bounds the whole call.
//
// Throttling is what isThrottle says, the definition the errors metric
// and calls_total use, on top of the SDK's own retryables: the SDK's
// defaults know throttling only by error code, so a bare HTTP 429 (a
// proxy or private endpoint answering "Too Many Requests" without an AWS
// code) was counted throttled yet failed at once
// (TestReview64HTTP429IsRetriedAsThrottling).
func newRetryer(r RetrySettings) awssdk.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = r.MaxAttempts
		if r.MaxBackoff != nil {
			o.MaxBackoff = r.MaxBackoff.Duration
		}
		o.RateLimiter = ratelimit.None
		o.Retryables = append(o.Retryables, retry.IsErrorRetryableFunc(throttleTernary))
		o.Throttles = append(o.Throttles, retry.IsErrorThrottleFunc(throttleTernary))
	})
}

// throttleTernary is isThrottle as the retryer's checks want it: true for
// throttling, unknown otherwise, so every other answer stays the SDK's
// checks' to decide (a canceled context is never retried:
// NoRetryCanceledError comes first).
func throttleTernary(err error) awssdk.Ternary {
	if isThrottle(err) {
		return awssdk.TrueTernary
	}
	return awssdk.UnknownTernary
}

func staticCredentials(c *StaticCredentials) (awssdk.CredentialsProvider, error) {
	id, err := c.AccessKeyID.Resolve()
	if err != nil {
		return nil, fmt.Errorf("credentials.accessKeyID: %w", err)
	}
	secret, err := c.SecretAccessKey.Resolve()
	if err != nil {
		return nil, fmt.Errorf("credentials.secretAccessKey: %w", err)
	}
	token := ""
	if c.SessionToken.IsSet() {
		if token, err = c.SessionToken.Resolve(); err != nil {
			return nil, fmt.Errorf("credentials.sessionToken: %w", err)
		}
	}
	return credentials.NewStaticCredentialsProvider(id, secret, token), nil
}

func assumeRole(cfg awssdk.Config, stsEndpoint string, r *AssumeRole) awssdk.CredentialsProvider {
	client := sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = endpoint(stsEndpoint) })
	p := stscreds.NewAssumeRoleProvider(client, r.RoleARN, func(o *stscreds.AssumeRoleOptions) {
		o.RoleSessionName = r.SessionName
		if r.ExternalID != "" {
			o.ExternalID = awssdk.String(r.ExternalID)
		}
	})
	return awssdk.NewCredentialsCache(p)
}

// Initialize starts the recorder of the events announcing a load
// balancer's (or target group's) replacement before it is made; the
// backend builds its AWS clients in New.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	client, err := clientBuilder.Client(backends.EventComponent)
	if err != nil {
		klog.Background().WithValues("backend", c.name).Error(err, "Cannot create a client for events; replacements will only be logged")
		return
	}
	c.lb.events.setRecorder(backends.NewEventRecorder(client, stop))
}

// LoadBalancer returns the NLB implementation.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c.lb, true }

// InstancesV2 returns the EC2 instance lookups.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c.instances, true }

// Routes returns pod-CIDR routes when the config's routes section is set.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) {
	if c.routes == nil {
		return nil, false
	}
	return c.routes, true
}

// ProviderName returns the backend type.
func (c *Cloud) ProviderName() string { return Type }

// Package awsfake is a stateful, in-process fake of the parts of the Amazon
// EC2, Elastic Load Balancing v2 and STS APIs the AWS backend uses. It speaks
// the real wire protocols (form-encoded Query requests, XML responses, AWS
// error codes, pagination) so that aws-sdk-go-v2 clients pointed at it with
// BaseEndpoint exercise their real signing, encoding, retries and error
// mapping. It records every call by action and can throttle or fail on
// demand. Shapes follow the AWS API reference; where the fake simplifies
// (no real networking, one account), it says so on the method.
//
// Tests serve it with httptest.NewServer(fake). Programs that are not tests
// (the demo) and end-to-end tests that run the CCM binary use the same
// exported API:
//
//	fake := awsfake.New("eu-west-1")
//	vpc := fake.Seed(awsfake.SeedSpec{ClusterID: "demo", Instances: 3})
//	running, err := fake.Start("127.0.0.1:0") // running.URL is the endpoint
//	defer running.Close()
//
// then configure an aws backend with region eu-west-1, vpc vpc.VPCID,
// endpoints ec2, elbv2 and sts all set to running.URL, and static
// credentials (any values: the fake checks no signature). Seed creates a
// 10.0.0.0/16 VPC with, per zone, a public subnet tagged
// kubernetes.io/role/elb=1 and a private one tagged
// kubernetes.io/role/internal-elb=1, and running instances in the private
// subnets. AddVPC, AddSubnet, AddInstance, SetInstanceState and
// RemoveInstance shape anything else (SetSubnetTag tags a subnet, as
// someone in the console would); LoadBalancers, TargetGroups,
// SecurityGroups, SecurityGroupIngress, ResourceCount, CallCounts,
// MutatingCalls and MutatingRequests show what the backend did; SetRateLimits (AWS's token
// buckets), Throttle, SetOutage, FailNext,
// FailMutationsAfter, SetProvisioningPolls and SetSecurityGroupReleasePolls
// make AWS misbehave; SetTargetsPerTargetGroup moves AWS's quota of 1,000
// targets per target group, SetRulesPerSecurityGroup its quota of 60
// inbound rules per security group. Calls naming resources (by ARN, name or load
// balancer) cost what they answer, not what the fake holds, so that a scale
// run measures its client (elbv2_index.go).
package awsfake

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// API versions the SDK sends in the Version parameter; they tell the
// services apart on one endpoint.
const (
	ec2Version   = "2016-11-15"
	elbv2Version = "2015-12-01"
	stsVersion   = "2011-06-15"
)

// Account is the fake's account ID, used in ARNs and owner IDs.
const Account = "123456789012"

// Server is the fake. The zero value is not usable: call New.
type Server struct {
	// certs are the certificate ARNs TLS listeners may use (AddCertificate).
	certs map[string]bool
	// eips are the Elastic IP allocation IDs of the account (AddAddress).
	eips map[string]bool

	mu     sync.Mutex
	region string
	seq    int

	instances map[string]*Instance
	vpcs      map[string]string // VPC ID to CIDR.
	subnets   map[string]*Subnet
	sgs       map[string]*securityGroup
	routes    map[string]*RouteTable
	lbs       map[string]*loadBalancer // by ARN.
	tgs       map[string]*targetGroup  // by ARN.
	listeners map[string]*listener     // by ARN.
	// idx indexes lbs, tgs and listeners (elbv2_index.go).
	idx elbIndex

	// calls counts SDK invocations by action, attempts every request.
	calls    map[string]int
	attempts map[string]int
	// bucketCalls counts the calls by AWS bucket (BucketCalls).
	bucketCalls map[string]int
	log         []string
	// params are the parameters each action was sent, list indexes as N.
	params map[string]map[string]bool
	keys   map[string]string
	// mutating are the mutating requests that arrived, each attempt
	// (MutatingRequests).
	mutating []Request
	// validKeys are the access keys accepted (nil: any); rejected counts
	// the requests refused for theirs.
	validKeys map[string]bool
	rejected  int
	throttle  int
	outage    bool
	failNext  map[string]string
	// mutationsLeft, when not negative, is how many more mutating calls
	// succeed before every later one fails.
	mutationsLeft int

	// noTargetGroupsNotFound: DescribeTargetGroups(LoadBalancerArn) of a
	// load balancer no listener forwards from answers TargetGroupNotFound
	// instead of an empty list (SetNoTargetGroupsNotFound).
	noTargetGroupsNotFound bool

	provisioningPolls   int
	sgReleasePolls      int
	deregistrationDelay time.Duration
	// targetsPerGroup is the account's "Targets per Target Group per
	// Region" quota (SetTargetsPerTargetGroup; 0: none).
	targetsPerGroup int
	// rulesPerGroup is the account's "Inbound or outbound rules per
	// security group" quota (SetRulesPerSecurityGroup; 0: none).
	rulesPerGroup int

	// rateLimits, when set, are AWS's token buckets (SetRateLimits);
	// buckets their state by API and action; throttled counts refusals.
	rateLimits *RateLimits
	buckets    map[string]*tokens
	throttled  int
}

// New returns an empty fake for region.
func New(region string) *Server {
	return &Server{
		region:      region,
		instances:   map[string]*Instance{},
		vpcs:        map[string]string{},
		subnets:     map[string]*Subnet{},
		sgs:         map[string]*securityGroup{},
		routes:      map[string]*RouteTable{},
		lbs:         map[string]*loadBalancer{},
		tgs:         map[string]*targetGroup{},
		listeners:   map[string]*listener{},
		idx:         newELBIndex(),
		calls:       map[string]int{},
		attempts:    map[string]int{},
		bucketCalls: map[string]int{},
		params:      map[string]map[string]bool{},
		keys:        map[string]string{},
		failNext:    map[string]string{},

		mutationsLeft:       -1,
		deregistrationDelay: DefaultDeregistrationDelay,
		targetsPerGroup:     DefaultTargetsPerTargetGroup,
		rulesPerGroup:       DefaultRulesPerSecurityGroup,
	}
}

// DefaultDeregistrationDelay is how long a deregistered target stays
// listed as draining, AWS's default deregistration_delay.timeout_seconds.
const DefaultDeregistrationDelay = 300 * time.Second

// SetDeregistrationDelay changes how long AWS's default deregistration
// delay (300 s) lasts here: deregistered targets drain for their group's
// deregistration_delay.timeout_seconds scaled by d/300s (0: they disappear
// at once). The attribute itself keeps AWS's value.
func (s *Server) SetDeregistrationDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deregistrationDelay = d
}

// ServeHTTP answers one Query-protocol request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	action, version := r.PostForm.Get("Action"), r.PostForm.Get("Version")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts[action]++
	if firstAttempt(r.Header.Get("amz-sdk-request")) {
		s.calls[action]++
		s.log = append(s.log, action)
		if key := bucketKey(action, version); key != "" {
			s.bucketCalls[key]++
		}
	}
	s.recordParams(action, r.PostForm)
	key := accessKeyID(r.Header.Get("Authorization"))
	if key == "" && action != "AssumeRoleWithWebIdentity" {
		// AWS refuses unsigned requests (all but STS's web-identity call).
		// The fake checks that a request is signed (SigV4) but not the
		// signature itself.
		writeError(w, version, &Error{Status: http.StatusForbidden, Code: "MissingAuthenticationToken", Message: "Request is missing Authentication Token"})
		return
	}
	s.keys[action] = key
	if IsMutating(action) {
		s.mutating = append(s.mutating, Request{At: time.Now(), Action: action, AccessKey: key})
	}
	if e := s.authError(key, version); e != nil {
		writeError(w, version, e)
		return
	}
	if e := s.injectedError(action); e != nil {
		writeError(w, version, e)
		return
	}
	if e := s.rateLimited(action, version, time.Now()); e != nil {
		writeError(w, version, e)
		return
	}
	var (
		body any
		err  *Error
	)
	switch version {
	case ec2Version:
		body, err = s.ec2(action, r.PostForm)
	case elbv2Version:
		body, err = s.elbv2(action, r.PostForm)
	case stsVersion:
		body, err = s.sts(action, r.PostForm)
	default:
		err = &Error{Status: http.StatusBadRequest, Code: "InvalidAction", Message: fmt.Sprintf("unknown API version %q", version)}
	}
	if err != nil {
		writeError(w, version, err)
		return
	}
	writeXML(w, body)
}

// injectedError returns the error an outage, throttling or FailNext asks for.
func (s *Server) injectedError(action string) *Error {
	switch {
	case s.outage:
		return &Error{Status: http.StatusServiceUnavailable, Code: "ServiceUnavailable", Message: "the service is unavailable (simulated outage)"}
	case s.throttle > 0:
		s.throttle--
		return &Error{Status: http.StatusBadRequest, Code: "Throttling", Message: "Rate exceeded"}
	case s.failNext[action] != "":
		code := s.failNext[action]
		delete(s.failNext, action)
		return &Error{Status: http.StatusBadRequest, Code: code, Message: "injected failure"}
	case s.mutationsLeft == 0 && IsMutating(action):
		return &Error{Status: http.StatusForbidden, Code: "AccessDenied", Message: "injected failure: no more mutating calls succeed (a crash between two steps)"}
	case s.mutationsLeft > 0 && IsMutating(action):
		s.mutationsLeft--
	}
	return nil
}

// FailMutationsAfter lets the next n mutating calls succeed and makes every
// later one fail with AccessDenied (an error the SDK does not retry), as a
// crash between two steps would, until ClearMutationFailures.
func (s *Server) FailMutationsAfter(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mutationsLeft = n
}

// ClearMutationFailures undoes FailMutationsAfter.
func (s *Server) ClearMutationFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mutationsLeft = -1
}

// Throttle makes the next n calls, whatever their action, fail with a
// throttling error (Throttling for ELBv2, RequestLimitExceeded for EC2).
func (s *Server) Throttle(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle = n
}

// SetNoTargetGroupsNotFound chooses how DescribeTargetGroups with a
// LoadBalancerArn answers for a load balancer that has no target group: an
// empty list (false, the default) or TargetGroupNotFound (400, true). The
// ELBv2 API reference lists that error for the call without saying which
// answer this case gets; clients must take either as "none".
func (s *Server) SetNoTargetGroupsNotFound(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noTargetGroupsNotFound = on
}

// SetOutage makes every call fail with 503 ServiceUnavailable while on.
func (s *Server) SetOutage(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outage = on
}

// FailNext makes the next call of action fail with the error code.
func (s *Server) FailNext(action, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext[action] = code
}

// SetProvisioningPolls makes new load balancers stay in state provisioning
// for n DescribeLoadBalancers answers before turning active (default 0).
func (s *Server) SetProvisioningPolls(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.provisioningPolls = n
}

// SetSecurityGroupReleasePolls makes DeleteSecurityGroup answer
// DependencyViolation n times for a group whose load balancer was just
// deleted, as AWS does while the load balancer's network interfaces linger.
func (s *Server) SetSecurityGroupReleasePolls(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sgReleasePolls = n
}

// accessKeyID returns the access key ID of a SigV4 Authorization header
// ("AWS4-HMAC-SHA256 Credential=AKID/20260101/eu-west-1/ec2/aws4_request,
// ..."), or "".
func accessKeyID(auth string) string {
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok || !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") {
		return ""
	}
	key, _, _ := strings.Cut(cred, "/")
	return key
}

// LastAccessKey returns the access key ID that signed the last call of
// action, to tell which credentials a client used.
func (s *Server) LastAccessKey(action string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[action]
}

// Calls returns how many times action was called: one per SDK invocation,
// however many attempts it took (see Attempts).
func (s *Server) Calls(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[action]
}

// CallCounts returns a copy of the call counts by action.
func (s *Server) CallCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// TotalCalls returns the number of calls of every action.
func (s *Server) TotalCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.calls {
		n += v
	}
	return n
}

// MutatingCalls returns the calls, in order, whose action changes state.
func (s *Server) MutatingCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, a := range s.log {
		if IsMutating(a) {
			out = append(out, a)
		}
	}
	return out
}

// Request is one request that reached the fake.
type Request struct {
	// At is when it arrived.
	At time.Time
	// Action is its action (CreateLoadBalancer).
	Action string
	// AccessKey is the access key ID that signed it: which client sent it.
	AccessKey string
}

// MutatingRequests returns the requests, in order of arrival, whose
// action changes state: every attempt, retries included, with the access
// key that signed it and when it arrived, so that a test can tell that a
// client sent none after a point (a replica that lost its lease). Only
// signed requests are recorded (an unsigned one is refused before any
// action).
func (s *Server) MutatingRequests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.mutating...)
}

// ResetCalls forgets the recorded calls.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = map[string]int{}
	s.attempts = map[string]int{}
	s.bucketCalls = map[string]int{}
	s.log = nil
	s.mutating = nil
}

// firstAttempt tells whether a request is an SDK invocation's first
// attempt: aws-sdk-go-v2 sends "amz-sdk-request: attempt=N; max=M" and
// sends a retry (a throttled or failed attempt) again with N+1. A request
// without the header (another client) is counted as a call of its own.
func firstAttempt(header string) bool {
	for _, part := range strings.Split(header, ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "attempt="); ok {
			return v == "1"
		}
	}
	return true
}

// Attempts returns how many requests of action arrived, retries included
// (Calls counts each SDK invocation once).
func (s *Server) Attempts(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[action]
}

// TotalAttempts returns the number of requests of every action, retries
// included.
func (s *Server) TotalAttempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.attempts {
		n += v
	}
	return n
}

// listIndex is a list member's index in a parameter name.
var listIndex = regexp.MustCompile(`\.[0-9]+(\.|$)`)

func (s *Server) recordParams(action string, f url.Values) {
	if s.params[action] == nil {
		s.params[action] = map[string]bool{}
	}
	for k := range f {
		if k != "Action" && k != "Version" {
			s.params[action][listIndex.ReplaceAllString(listIndex.ReplaceAllString(k, ".N$1"), ".N$1")] = true
		}
	}
}

// Parameters returns, by action, the parameters clients have sent it since
// the fake was made (list indexes written N, e.g. Filter.N.Value.N),
// sorted: what a client relies on the fake to understand.
func (s *Server) Parameters() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	for action, ps := range s.params {
		out[action] = sortedKeys(ps)
	}
	return out
}

// IsMutating reports whether an action changes state.
func IsMutating(action string) bool {
	for _, p := range []string{"Describe", "Get", "List", "AssumeRole"} {
		if strings.HasPrefix(action, p) {
			return false
		}
	}
	return true
}

// nextID returns a new hex suffix for resource IDs.
func (s *Server) nextID() string {
	s.seq++
	return fmt.Sprintf("%017x", s.seq)
}

// indices returns the sorted list indices N present as prefix.N or
// prefix.N.* in the form.
func indices(form url.Values, prefix string) []int {
	seen := map[int]bool{}
	for k := range form {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		var n int
		if _, err := fmt.Sscanf(num, "%d", &n); err == nil && fmt.Sprint(n) == num {
			seen[n] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// list returns the values of prefix.1, prefix.2, ...
func list(form url.Values, prefix string) []string {
	var out []string
	for _, i := range indices(form, prefix) {
		out = append(out, form.Get(fmt.Sprintf("%s.%d", prefix, i)))
	}
	return out
}

// items returns the prefixes prefix.1, prefix.2, ... of a list of structures.
func items(form url.Values, prefix string) []string {
	var out []string
	for _, i := range indices(form, prefix) {
		out = append(out, fmt.Sprintf("%s.%d", prefix, i))
	}
	return out
}

// sortedKeys returns a map's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

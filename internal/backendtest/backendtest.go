// Package backendtest is the backend contract as one executable suite. Every
// backend under pkg/backends runs it from a conformance_test.go against the
// most real server it has, passing hooks that build the backend and act on
// its cloud (make an instance gone, break the cloud, fail a creation step);
// the suite asserts the contract written in package backends:
//
//   - InstanceExists is (false, nil) only for an instance the cloud
//     positively reports gone. An outage, an unreadable instance, a
//     providerID of a region, zone, vCenter or site the backend does not
//     serve, or one that does not parse, is an error: a false deletes the
//     Node.
//   - InstanceShutdown is true only on fresh evidence: never from a snapshot
//     older than the instance's last power change.
//   - InstanceMetadata never returns (nil, nil); a node with no providerID
//     is claimed only on a strong match.
//   - GetLoadBalancer reports exists while any part is left in the cloud;
//     EnsureLoadBalancerDeleted removes every part and is idempotent;
//     EnsureLoadBalancer and UpdateLoadBalancer with nothing changed make no
//     mutating call; a crash between any two creation steps leaves exactly
//     one load balancer after the next Ensure; UpdateLoadBalancer never
//     creates one.
//   - A load balancer is converged by the call that made it: every pair of
//     calls the controllers produce on an unchanged Service (Ensure then
//     Ensure, Ensure then Update, Update then Ensure) makes no mutating
//     call after the first.
//   - Strangers are never changed or deleted: what an operator or another
//     tool made beside a Service's load balancer (a hand-made listener or
//     target group, the cluster's node security group, another cluster's
//     load balancer, a floating IP or address kept for someone else) is left
//     as it was through creates, changes of ports, annotations and nodes, a
//     repair pass, a crash between steps and the delete; a hand-made
//     listener on the Service's own load balancer until the delete takes
//     the load balancer.
//   - Errors are classed by the backend's type (Registration.ClassifyError):
//     the cloud throttling every call is throttled, refusing the credentials
//     auth, an outage never not_found, auth or throttled, a malformed
//     providerID user; the router counts and judges the backend by the
//     class.
//   - A dry run (backends.WithDryRun, what `multicloud-ccm plan` runs the
//     backends under) makes no mutating call: a create, a change and a
//     delete leave the cloud as it was and report what they would do.
//
// A new backend's author writes the hooks of Fixture and calls Run; nil
// hooks skip the clauses they serve, and each skip is logged.
package backendtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// InsideLoadBalancer starts the lines of a strangers fingerprint
// (LoadBalancerHooks.Strangers) that describe a stranger living inside the
// Service's own load balancer (a hand-made listener): compared through
// every step but the delete.
const InsideLoadBalancer = "inside the load balancer: "

// ReasonInvalidProviderID is the event reason every backend gives a
// providerID of its scheme that does not parse.
const ReasonInvalidProviderID = "InvalidProviderID"

// clusterName is what the suite passes as the service controller's cluster
// name.
const clusterName = "kubernetes"

// Fixture is one backend under test and the hooks the suite needs on its
// cloud.
type Fixture struct {
	// Cloud is the backend under test, built against its test cloud, with
	// caches short enough (TTL, miss interval) that a change in the cloud is
	// seen within Settle.
	Cloud cloudprovider.Interface
	// Settle bounds how long the backend may take to notice a change in the
	// cloud. Default 5 s.
	Settle time.Duration
	// Provision bounds how long EnsureLoadBalancer may keep returning errors
	// (a load balancer still provisioning) before it must succeed. Default
	// 2 min.
	Provision time.Duration
	// Instances holds the instance hooks; nil: the backend has no instances.
	Instances *InstanceHooks
	// LoadBalancers holds the load-balancer hooks; nil: the backend has no
	// load balancers.
	LoadBalancers *LoadBalancerHooks
	// Type is the backend's registered type (backends.Register): the
	// clause "errors are classed by the backend's type" checks the type's
	// Registration.ClassifyError against the errors the backend returns.
	// "": the clause is skipped.
	Type string
}

// InstanceHooks act on the backend's instances.
type InstanceHooks struct {
	// Running creates a new running instance and returns its Node as the
	// upstream node controller leaves it once initialised (spec.providerID,
	// addresses, and the labels the backend's InstanceMetadata adds).
	Running func(t *testing.T) *corev1.Node
	// Gone removes the node's instance so that the cloud positively says it
	// does not exist.
	Gone func(t *testing.T, node *corev1.Node)
	// Unreadable leaves the instance in place but makes the cloud unable to
	// tell its state. nil if the cloud has no such state.
	Unreadable func(t *testing.T, node *corev1.Node)
	// PowerOff and PowerOn change the instance's power state; nil: the
	// backend has no power state.
	PowerOff, PowerOn func(t *testing.T, node *corev1.Node)
	// Outage makes every call to the cloud fail (or time out) until restore
	// is called. nil: the backend has no cloud to lose.
	Outage func(t *testing.T) (restore func())
	// Throttle makes the cloud answer every call with its throttling
	// answer (AWS Throttling or RequestLimitExceeded, HTTP 429) until
	// restore is called. nil: the clause's throttling check is skipped.
	Throttle func(t *testing.T) (restore func())
	// Refuse makes the cloud refuse the backend's credentials or session
	// (AWS AuthFailure, HTTP 401, vSphere NotAuthenticated) until restore
	// is called. nil: the clause's refusal check is skipped.
	Refuse func(t *testing.T) (restore func())
	// Absent returns a well-formed providerID of this backend's scheme, in
	// the region, zone, vCenter or site it serves, of an instance that has
	// never existed.
	Absent func(t *testing.T) string
	// Foreign returns well-formed providerIDs of this scheme that name a
	// region, zone, vCenter, datacenter or site this backend does not serve.
	Foreign func(t *testing.T) []string
	// ForeignNodes returns initialised nodes whose own record (labels the
	// backend's InstanceMetadata wrote, such as a vCenter or datacenter)
	// names a place this backend does not serve, for schemes whose
	// providerIDs cannot say where the instance lives.
	ForeignNodes func(t *testing.T) []*corev1.Node
	// Malformed lists providerIDs with this backend's scheme that do not
	// parse.
	Malformed []string
	// StrongMatch returns a node with no providerID that matches a running
	// instance strongly enough to be claimed; WeakMatch one that must not be
	// claimed. Either may be nil when the backend never claims such nodes.
	StrongMatch, WeakMatch func(t *testing.T) *corev1.Node
}

// LoadBalancerHooks act on the backend's load balancers.
type LoadBalancerHooks struct {
	// Service returns a new LoadBalancer Service (unique name and UID) that
	// the backend serves.
	Service func(t *testing.T) *corev1.Service
	// Nodes returns the nodes handed to EnsureLoadBalancer.
	Nodes func(t *testing.T) []*corev1.Node
	// Mutations returns how many mutating cloud calls the backend has made
	// so far.
	Mutations func() int
	// FailMutationsAfter lets the next n mutating calls succeed and makes
	// every later one fail, as a crash between two steps would, until
	// restore is called. nil: the crash clauses are skipped.
	FailMutationsAfter func(t *testing.T, n int) (restore func())
	// Parts counts what the cloud holds for the Service: its load balancers,
	// and all its parts (load balancers included).
	Parts func(t *testing.T, svc *corev1.Service) (loadBalancers, parts int)
	// Strangers creates, beside the Service's load balancer (the suite has
	// ensured it), what an operator or another tool would make there and
	// the backend must never change or delete, and returns a fingerprint
	// of them: a text that changes when any of them is modified or
	// deleted. Strangers are not parts (Parts never counts them). A
	// stranger that lives inside our load balancer (a hand-made listener on
	// our NLB or Octavia load balancer) is in the fingerprint too, on lines
	// starting with InsideLoadBalancer: it must be left as it was until
	// the delete, which takes it with the load balancer (the suite then
	// compares the fingerprint without those lines); its own resources
	// (the target group it forwards to) stay in the comparison. nil: the
	// ownership clause is skipped.
	Strangers func(t *testing.T, svc *corev1.Service) (fingerprint func(t *testing.T) string)
	// Variants returns changed copies of svc as a user would edit it
	// (annotations the backend honours), each applied in turn by the
	// ownership clause. nil: only the suite's own changes (ports, nodes).
	Variants func(t *testing.T, svc *corev1.Service) []*corev1.Service
}

// Run runs the backend contract against fixtures newFixture builds; each
// subtest calls newFixture once.
func Run(t *testing.T, newFixture func(t *testing.T) *Fixture) {
	t.Helper()
	for _, c := range instanceClauses {
		t.Run("instances/"+c.name, func(t *testing.T) {
			f := setUp(t, newFixture)
			if f.Instances == nil {
				t.Skip("backend has no instances")
			}
			c.run(t, newSuite(t, f))
		})
	}
	for _, c := range loadBalancerClauses {
		t.Run("loadbalancers/"+c.name, func(t *testing.T) {
			f := setUp(t, newFixture)
			if f.LoadBalancers == nil {
				t.Skip("backend has no load balancers")
			}
			c.run(t, newSuite(t, f))
		})
	}
}

type clause struct {
	name string
	run  func(t *testing.T, s *suite)
}

func setUp(t *testing.T, newFixture func(t *testing.T) *Fixture) *Fixture {
	t.Helper()
	f := newFixture(t)
	if f == nil || f.Cloud == nil {
		t.Fatal("backendtest: the fixture has no Cloud")
	}
	if f.Settle <= 0 {
		f.Settle = 5 * time.Second
	}
	if f.Provision <= 0 {
		f.Provision = 2 * time.Minute
	}
	return f
}

// suite is one clause's view of a fixture.
type suite struct {
	f   *Fixture
	ctx context.Context
	iv2 cloudprovider.InstancesV2
	lb  cloudprovider.LoadBalancer
}

func newSuite(t *testing.T, f *Fixture) *suite {
	t.Helper()
	s := &suite{f: f, ctx: t.Context()}
	if f.Instances != nil {
		iv2, ok := f.Cloud.InstancesV2()
		if !ok || iv2 == nil {
			t.Fatal("backend has instance hooks but offers no InstancesV2")
		}
		s.iv2 = iv2
	}
	if f.LoadBalancers != nil {
		lb, ok := f.Cloud.LoadBalancer()
		if !ok || lb == nil {
			t.Fatal("backend has load-balancer hooks but offers no LoadBalancer")
		}
		s.lb = lb
	}
	return s
}

// skipUnless skips the clause when a hook it needs is nil.
func skipUnless(t *testing.T, have bool, hook string) {
	t.Helper()
	if !have {
		t.Skipf("the fixture has no %s hook", hook)
	}
}

// poll calls f every 50 ms until it returns nil or within has passed; it
// returns f's last error.
func poll(ctx context.Context, within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func nodeName(node *corev1.Node) string {
	if node.Spec.ProviderID != "" {
		return fmt.Sprintf("node %s (%s)", node.Name, node.Spec.ProviderID)
	}
	return "node " + node.Name
}

package aws

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"
	"weak"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

const (
	testRegion  = "eu-west-1"
	testVPC     = "vpc-0a1"
	testCluster = "c1"
)

// env is a backend built by New against a fake AWS.
type env struct {
	fake  *awsfake.Server
	cloud *Cloud
	url   string
}

// newEnv starts a fake with a VPC (10.0.0.0/16) and two zones, each with a
// public (role elb) and a private (role internal-elb) subnet, and builds the
// backend through its config parser and Factory with static credentials.
func newEnv(t testing.TB, tweaks ...func(*Settings)) *env {
	t.Helper()
	fake := awsfake.New(testRegion)
	fake.AddVPC(testVPC, "10.0.0.0/16")
	for i, z := range []string{"a", "b"} {
		fake.AddSubnet(awsfake.Subnet{ID: "subnet-0" + z, VPCID: testVPC, Zone: testRegion + z, ZoneID: fmt.Sprintf("euw1-az%d", i+1),
			CIDR: fmt.Sprintf("10.0.%d.0/24", i), Tags: map[string]string{tagRoleELB: "1", "Name": "public-" + z}})
		fake.AddSubnet(awsfake.Subnet{ID: "subnet-1" + z, VPCID: testVPC, Zone: testRegion + z, ZoneID: fmt.Sprintf("euw1-az%d", i+1),
			CIDR: fmt.Sprintf("10.0.%d.0/24", 10+i), Tags: map[string]string{tagRoleInternalELB: "1"}})
	}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return &env{fake: fake, cloud: buildCloud(t, srv.URL, tweaks...), url: srv.URL}
}

// buildCloud builds a backend for a fake at url, as the CCM would, with
// the fast test budget (testBudget) unless a tweak sets rateLimits.
func buildCloud(t testing.TB, url string, tweaks ...func(*Settings)) *Cloud {
	t.Helper()
	return namedCloud(t, "aws-1", url, tweaks...)
}

// namedCloud builds the aws backend name against the fake at url (the
// test region and VPC, the fast test budget, then tweaks); it leaves the
// live registry when the test ends.
func namedCloud(t testing.TB, name, url string, tweaks ...func(*Settings)) *Cloud {
	t.Helper()
	t.Setenv("TEST_AWS_KEY", "AKIDFAKE")
	t.Setenv("TEST_AWS_SECRET", "fake-secret")
	raw := fmt.Sprintf(`{"region": %q, "vpc": %q, "endpoints": {"ec2": %q, "elbv2": %q, "sts": %q},
		"credentials": {"accessKeyID": {"env": "TEST_AWS_KEY"}, "secretAccessKey": {"env": "TEST_AWS_SECRET"}},
		"retry": {"maxAttempts": 6, "maxBackoff": "5ms"}}`, testRegion, testVPC, url, url, url)
	settings, errs := ParseSection([]byte(raw), field.NewPath("aws"), t.TempDir())
	if len(errs) > 0 {
		t.Fatalf("settings: %v", errs.ToAggregate())
	}
	s := settings.(*Settings)
	// A test's own rateLimits (a tweak) replace the fast test budget.
	testBudget(s)
	for _, tw := range tweaks {
		tw(s)
	}
	c, err := New(context.Background(), backends.Options{Name: name, ClusterID: testCluster, Settings: s})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	unregisterWhenDone(t, c.(*Cloud))
	return c.(*Cloud)
}

// addInstance adds a running instance i-000000000000<n> in zone a or b.
func (e *env) addInstance(n int, tweaks ...func(*awsfake.Instance)) awsfake.Instance {
	z := []string{"a", "b"}[n%2]
	in := awsfake.Instance{ID: instanceID(n), InstanceType: "m5.large", Zone: testRegion + z, ZoneID: fmt.Sprintf("euw1-az%d", n%2+1), VPCID: testVPC,
		SubnetID: "subnet-1" + z, PrivateIPs: []string{fmt.Sprintf("10.0.%d.%d", 10+n%2, 10+n%200)}, State: "running",
		PrivateDNSName: fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", 10+n%2, 10+n%200), SourceDestCheck: true}
	for _, tw := range tweaks {
		tw(&in)
	}
	e.fake.AddInstance(in)
	return in
}

func instanceID(n int) string { return fmt.Sprintf("i-%012x", n) }

type (
	nodeTweak = testutil.NodeTweak
	svcTweak  = testutil.ServiceTweak
)

// newNode returns a Ready node created an hour ago.
func newNode(name string, tweaks ...nodeTweak) *corev1.Node {
	return testutil.NewNode(name, append([]nodeTweak{readyHourAgo}, tweaks...)...)
}

func readyHourAgo(n *corev1.Node) {
	n.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
}

func createdNow(n *corev1.Node) { n.CreationTimestamp = metav1.Now() }

// newService returns a LoadBalancer Service with port 80/TCP on nodePort
// 30080.
func newService(name string, tweaks ...svcTweak) *corev1.Service {
	return testutil.NewService(name, tweaks...)
}

// withAnnotation sets one of the backend's annotations.
func withAnnotation(n annotation.Name, v string) svcTweak {
	return testutil.WithAnnotation(string(n), v)
}

// withAnnotations sets the backend's annotations in m.
func withAnnotations(m map[annotation.Name]string) svcTweak {
	return func(s *corev1.Service) {
		for n, v := range m {
			s.Annotations[string(n)] = v
		}
	}
}

func withPort(name string, proto corev1.Protocol, port, nodePort int32) svcTweak {
	return func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: name, Protocol: proto, Port: port, NodePort: nodePort})
	}
}

// collected reports whether w's object is garbage collected within a few
// seconds. Another goroutine can hold a reference a moment after the call
// that made it returned (net/http's transport finishing the exchange, an
// earlier test's controller shutting down); only a reference kept beyond
// that, by something that lives for the process, is the defect the
// callers look for.
func collected[T any](w weak.Pointer[T]) bool {
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		if w.Value() == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

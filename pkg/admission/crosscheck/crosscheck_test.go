// Package crosscheck tests that the annotation registry, which the
// admission policy is generated from, reads values as the backends do. It
// holds only tests: it builds the backends, so it stays apart from
// package admission, which does not depend on them.
package crosscheck

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/admission"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal" // registers baremetal.
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"

	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws"       // registers aws.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/openstack" // registers openstack.
)

// crossRules are the backends' checks across annotations or against the
// Service, which one annotation alone can trigger with the backend's
// defaults; the policy does not make them (docs/chart.md says so).
var crossRules = []string{
	"access logs need a bucket",
	"must not exceed the delay",
	"are for internet-facing load balancers",
	"are for internal load balancers",
	"private addresses are for internal",
	"no such class",
	"is not one of",           // attribute names
	" must be one of ",        // attribute values
	" must be true, false",    // attribute values
	"is not a TCP port",       // ssl-ports against the ports
	"cannot be turned off",    // preserve_client_ip with UDP
	"contradicts",             // two annotations of one setting
	"is not an IPv4 CIDR",     // source ranges with the address type
	"listed twice",            // security groups in both lists
	"is already in",           // same
	"needs TCP ports",         // OpenStack listener kinds
	"cannot be used together", // same
}

// afterCloud are the annotations a backend reads only after asking its
// cloud (the subnets, resolved by ID or Name tag): the dead cloud here
// stops it before.
var afterCloud = map[annotation.Name]bool{"service.beta.kubernetes.io/aws-load-balancer-subnets": true}

// stricter are the annotations whose values the backend judges by rules
// the registry leaves to it (docs/chart.md, "What it does not check"): the
// policy checks that they are not empty, the backend also that a
// Barbican reference (with the default certificate store), a floating
// subnet name pattern or tag list is well-formed. The registry must still
// refuse nothing the backend accepts.
var stricter = map[annotation.Name]bool{
	"loadbalancer.openstack.org/default-tls-container-ref": true,
	"loadbalancer.openstack.org/floating-subnet":           true,
	"loadbalancer.openstack.org/floating-subnet-tags":      true,
}

// cloudBackends builds an aws and an openstack backend from a cloud-config
// whose clouds answer nothing: a Service's annotations are read before
// any cloud call, so a bad value is the backend's user error, a good one a
// cloud error. The aws backend's API budget is off: these calls are about
// the annotations, and the default budget paced the failing calls of the
// good values (48 of the test's 51 s under -race).
func cloudBackends(t *testing.T) map[string]cloudprovider.LoadBalancer {
	t.Helper()
	// Access denied: an answer no client retries.
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>no cloud here</Message></Error></ErrorResponse>`))
	}))
	t.Cleanup(dead.Close)
	t.Setenv("ADMISSION_TEST_SECRET", "secret")
	cfg, err := config.Parse([]byte(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: admission
backends:
- name: aws
  type: aws
  aws:
    region: eu-west-1
    vpc: vpc-0123456789abcdef0
    credentials: {accessKeyID: {env: ADMISSION_TEST_SECRET}, secretAccessKey: {env: ADMISSION_TEST_SECRET}}
    endpoints: {ec2: `+dead.URL+`, elbv2: `+dead.URL+`}
    rateLimits: {ec2: {qps: -1, qpsWrite: -1}, elbv2: {qps: -1, qpsWrite: -1}}
- name: openstack
  type: openstack
  openstack:
    region: RegionOne
    auth: {authURL: `+dead.URL+`/v3, applicationCredentialID: x, applicationCredentialSecret: {env: ADMISSION_TEST_SECRET}}
    loadBalancer: {vipSubnetID: 5f9e3b43-3c4f-4a6f-9d3c-52ba1f2a0c11}
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]cloudprovider.LoadBalancer{}
	for _, b := range cfg.Backends {
		reg, _ := backends.Lookup(b.Type)
		c, err := reg.New(context.Background(), backends.Options{Name: b.Name, ClusterID: cfg.ClusterID, Settings: b.Settings})
		if err != nil {
			t.Fatal(err)
		}
		lb, ok := c.LoadBalancer()
		if !ok {
			t.Fatalf("%s offers no load balancers", b.Name)
		}
		out[b.Type] = lb
	}
	return out
}

// TestRegistryAgreesWithBackends: for every aws and openstack annotation of
// the registry and every sample value, the backend's own reading (its
// EnsureLoadBalancer, which reads the annotations before calling its
// cloud) refuses what Spec.Check refuses, with Spec.Check's message, and
// refuses nothing Spec.Check accepts but by a rule across annotations
// (crossRules). So the registry's kinds and parameters, which the policy
// is generated from, are the backends'.
func TestRegistryAgreesWithBackends(t *testing.T) {
	lbs := cloudBackends(t)
	for _, s := range annotation.Registry {
		for _, reader := range s.Readers() {
			lb, ok := lbs[reader]
			if !ok || s.Kind == annotation.KindUnchecked || afterCloud[s.Name] {
				continue
			}
			t.Run(string(s.Name)+"/"+reader, func(t *testing.T) {
				for _, v := range admission.Samples(s) {
					anns := map[string]string{string(s.Name): v}
					if s.HTTPHealthCheckOnly {
						anns[string(annotation.AWSHealthCheckProtocol)] = "HTTP"
					}
					want := s.CheckService(anns, false, nil)
					got := ensureProblems(t, lb, anns)
					switch {
					case want != nil && !strings.Contains(got, want.Error()):
						t.Errorf("%q: the registry says %q, the backend %q", v, want, got)
					case want == nil && got != "" && !crossRule(got) && !stricter[s.Name]:
						t.Errorf("%q: the registry accepts it, the backend says %q", v, got)
					}
				}
			})
		}
	}
}

func crossRule(msg string) bool {
	for _, r := range crossRules {
		if strings.Contains(msg, r) {
			return true
		}
	}
	return false
}

// ensureProblems runs the backend's EnsureLoadBalancer on a Service
// carrying only these annotations and returns its bad-annotation message
// ("": none; the cloud's error is expected).
func ensureProblems(t *testing.T, lb cloudprovider.LoadBalancer, anns map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web", Annotations: anns},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}},
		},
	}
	_, err := lb.EnsureLoadBalancer(ctx, "kubernetes", svc, nil)
	if ue, ok := backends.AsUserError(err); ok && ue.Reason == annotation.ReasonInvalid {
		return err.Error()
	}
	return ""
}

// kubeVIPBackend builds a bare-metal backend announcing through kube-vip,
// with a dual-stack pool, from the cloud-config as the binary reads it.
func kubeVIPBackend(t *testing.T) cloudprovider.LoadBalancer {
	t.Helper()
	cfg, err := config.Parse([]byte(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: admission
backends:
- name: metal
  type: baremetal
  baremetal:
    announce: kube-vip
    addressPools: [{name: p, addresses: [192.0.2.0/24, "2001:db8::/120"]}]
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Backends[0]
	reg, _ := backends.Lookup(b.Type)
	c, err := reg.New(context.Background(), backends.Options{Name: b.Name, ClusterID: cfg.ClusterID, Settings: b.Settings})
	if err != nil {
		t.Fatal(err)
	}
	lb, ok := c.LoadBalancer()
	if !ok {
		t.Fatal("the bare-metal backend offers no load balancers")
	}
	return lb
}

// TestKubeVIPRequestsAgreeWithBareMetal (issue 43): the registry's reading
// of kube-vip.io/loadbalancerIPs in a cluster whose bare-metal backend
// announces through kube-vip (Spec.CheckIn with Cluster.KubeVIP, which the
// policy's kube-vip check is held to by TestAdmissionDifferential) is the
// backend's own: for every sample value on a dual-stack Service, the
// backend's EnsureLoadBalancer refuses it with the registry's message
// exactly when the registry refuses it, and says nothing of the
// annotation otherwise. A value carrying the backend's mark is not read by
// the backend at all.
func TestKubeVIPRequestsAgreeWithBareMetal(t *testing.T) {
	lb := kubeVIPBackend(t)
	s, ok := annotation.Lookup("kube-vip.io/loadbalancerIPs")
	if !ok || s.KubeVIPMark == "" {
		t.Fatalf("kube-vip.io/loadbalancerIPs is not in the registry with its mark: %+v", s)
	}
	cluster := annotation.Cluster{KubeVIP: true}
	for _, v := range admission.Samples(s) {
		anns := map[string]string{string(s.Name): v}
		want := s.CheckIn(anns, false, cluster)
		got := kubeVIPProblem(t, lb, anns)
		switch {
		case want != nil && !strings.Contains(got, want.Error()):
			t.Errorf("%q: the registry says %q, the backend %q", v, want, got)
		case want == nil && got != "":
			t.Errorf("%q: the registry accepts it, the backend says %q", v, got)
		}
		anns[string(s.KubeVIPMark)] = "true"
		if got := kubeVIPProblem(t, lb, anns); got != "" {
			t.Errorf("%q marked as the backend's: the backend says %q", v, got)
		}
	}
}

// kubeVIPProblem runs the backend's EnsureLoadBalancer on a dual-stack
// Service carrying these annotations and returns its message about
// kube-vip.io/loadbalancerIPs ("": none; the backend, with no informer,
// then stops before assigning anything).
func kubeVIPProblem(t *testing.T, lb cloudprovider.LoadBalancer, anns map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	dual := corev1.IPFamilyPolicyRequireDualStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web", Annotations: anns},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeLoadBalancer,
			IPFamilyPolicy: &dual,
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports:          []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}},
		},
	}
	_, err := lb.EnsureLoadBalancer(ctx, "kubernetes", svc, nil)
	if err != nil && strings.Contains(err.Error(), "annotation kube-vip.io/loadbalancerIPs=") {
		if ue, ok := backends.AsUserError(err); !ok || ue.Reason != baremetal.ReasonInvalidLoadBalancerIPs {
			t.Errorf("%v: not a user error %s", err, baremetal.ReasonInvalidLoadBalancerIPs)
		}
		return err.Error()
	}
	return ""
}

package router

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// handingOverCloud is an lbCloud that leaves Services annotated
// aws-load-balancer-type: external to another controller, as the aws
// backend does (ImplementedElsewhere, unwrapped).
type handingOverCloud struct{ *lbCloud }

const awsLBType = "service.beta.kubernetes.io/aws-load-balancer-type"

func (c handingOverCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c handingOverCloud) EnsureLoadBalancer(ctx context.Context, cl string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	if s.Annotations[awsLBType] == "external" {
		return nil, cloudprovider.ImplementedElsewhere
	}
	return c.lbCloud.EnsureLoadBalancer(ctx, cl, s, nodes)
}

func (c handingOverCloud) UpdateLoadBalancer(ctx context.Context, cl string, s *corev1.Service, nodes []*corev1.Node) error {
	if s.Annotations[awsLBType] == "external" {
		return cloudprovider.ImplementedElsewhere
	}
	return c.lbCloud.UpdateLoadBalancer(ctx, cl, s, nodes)
}

// TestBackendHandingOverIsNotAFailure (issue 43, defect 3): a backend that
// answers ImplementedElsewhere (aws-load-balancer-type: external) has not
// failed. Alone, the router answers ImplementedElsewhere unwrapped, as
// upstream compares it, so no LoadBalancerBackendFailed on every sync;
// beside another backend, the other serves and the Service gets its
// address, with no error.
func TestBackendHandingOverIsNotAFailure(t *testing.T) {
	a, aws := newLBCloud("a", "192.0.2.1"), handingOverCloud{newLBCloud("aws", "198.51.100.1")}
	r := mustRouter(t, testConfig(), lbBackend("a", "baremetal", a), Backend{Name: "aws", Type: "aws", Scheme: "aws", Cloud: aws})
	alone := newService("alone", withLBBackend("aws"), testutil.WithAnnotation(awsLBType, "external"))
	both := newService("both", withLBBackend("aws,a"), testutil.WithAnnotation(awsLBType, "external"))
	c := startCluster(t, r, alone, both)
	ctx := context.Background()

	if _, err := r.EnsureLoadBalancer(ctx, cluster, c.service(t, "alone"), nil); err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream compares with ==.
		t.Fatalf("EnsureLoadBalancer(alone) = %v, want ImplementedElsewhere unwrapped", err)
	}
	if err := r.UpdateLoadBalancer(ctx, cluster, c.service(t, "alone"), nil); err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream compares with ==.
		t.Fatalf("UpdateLoadBalancer(alone) = %v, want ImplementedElsewhere unwrapped", err)
	}

	status, err := r.EnsureLoadBalancer(ctx, cluster, c.service(t, "both"), nil)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer(both) = %v, want a's load balancer and no error", err)
	}
	if len(status.Ingress) != 1 || status.Ingress[0].IP != "192.0.2.1" {
		t.Errorf("status = %v, want a's address alone", status.Ingress)
	}
	if err := r.UpdateLoadBalancer(ctx, cluster, c.service(t, "both"), nil); err != nil {
		t.Errorf("UpdateLoadBalancer(both) = %v, want nil", err)
	}
	if aws.holds(c.service(t, "both")) || aws.holds(c.service(t, "alone")) {
		t.Error("the handing-over backend was made to hold a load balancer")
	}
}

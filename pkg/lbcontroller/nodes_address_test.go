package lbcontroller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws" // the AWS backend type.
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// awsIPClass is a class served by the AWS backend with IP targets, by its
// default annotations.
const awsIPClass = "multicloud-ccm.io/aws-ip"

// awsConfig serves awsIPClass from the AWS backend, at the fake's url in
// the fake's vpc, without client-side budgets (the test counts no calls).
// awsSection is the AWS backend of the tests' configs, on the fake whose
// URL and VPC are the format's first and second arguments, with no budget.
const awsSection = `- name: aws
  type: aws
  aws:
    region: eu-west-1
    vpc: %[2]s
    endpoints: {ec2: %[1]q, elbv2: %[1]q, sts: %[1]q}
    credentials:
      accessKeyID: {env: LBCONTROLLER_TEST_AWS_KEY}
      secretAccessKey: {env: LBCONTROLLER_TEST_AWS_SECRET}
    retry: {maxAttempts: 2, maxBackoff: 100ms}
    rateLimits:
      ec2: {qps: -1, qpsWrite: -1}
      elbv2: {qps: -1, qpsWrite: -1}
`

const awsConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  classes:
  - {name: ` + awsIPClass + `, backend: aws, annotations: {service.beta.kubernetes.io/aws-load-balancer-nlb-target-type: ip}}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools: [{name: lan, addresses: ["192.0.2.0/28"]}]
` + awsSection

// startAWS runs the controller over a router with the AWS backend served
// by a fake ELBv2 and EC2 (internal/awsfake), on a fake API server holding
// objs and worker-0 (a bare-metal node with a private address: an IP
// target). The controller is given the router's Targeter, as in
// production.
func startAWS(t *testing.T, o envOptions, objs ...corev1.Service) (*env, *awsfake.Running) {
	t.Helper()
	running, vpcID := runAWSFake(t)
	o.doc = fmt.Sprintf(awsConfig, running.URL, vpcID)
	o.wrap = func(h *hookedCloud) Cloud { return routerTargets{h} }
	e := startEnv(t, o)
	for i := range objs {
		e.create(t, &objs[i])
	}
	return e, running
}

// runAWSFake serves the AWS backend's ELBv2 and EC2 with a fake
// (internal/awsfake) seeded for cluster "test" until the test ends, with
// the credentials the tests' configs name; it returns the fake and its
// VPC.
func runAWSFake(t *testing.T) (*awsfake.Running, string) {
	t.Helper()
	f := awsfake.New("eu-west-1")
	seeded := f.Seed(awsfake.SeedSpec{ClusterID: "test"})
	running, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = running.Close() })
	t.Setenv("LBCONTROLLER_TEST_AWS_KEY", "AKIDLBCONTROLLER")
	t.Setenv("LBCONTROLLER_TEST_AWS_SECRET", "secret")
	return running, seeded.VPCID
}

// routerTargets is the hooked router with the router's Targeter, as the
// controller sees the router it is given in production.
type routerTargets struct{ *hookedCloud }

func (c routerTargets) LoadBalancerTargets(svc *corev1.Service, nodes []*corev1.Node) []*corev1.Node {
	return c.routerCloud.(Targeter).LoadBalancerTargets(svc, nodes) //nolint:forcetypeassert // the router is a Targeter.
}

func (c routerTargets) LoadBalancerTargetsByBackend(svc *corev1.Service, nodes []*corev1.Node) map[string][]*corev1.Node {
	return c.routerCloud.(BackendTargeter).LoadBalancerTargetsByBackend(svc, nodes) //nolint:forcetypeassert // the router is a BackendTargeter.
}

func (c routerTargets) LoadBalancerTargetsEnsured(dec *router.Decision, svc *corev1.Service, nodes []*corev1.Node) map[string][]*corev1.Node {
	return c.routerCloud.(EnsuredTargeter).LoadBalancerTargetsEnsured(dec, svc, nodes) //nolint:forcetypeassert // the router is an EnsuredTargeter.
}

// ipTargets lists the IP addresses registered in every target group,
// sorted.
func ipTargets(f *awsfake.Running) []string {
	var out []string
	for _, tg := range f.TargetGroups() {
		for _, tgt := range tg.Targets {
			ip, _, _ := strings.Cut(tgt, ":")
			out = append(out, ip)
		}
	}
	slices.Sort(out)
	return out
}

// TestAddressAfterProviderIDReachesClassedIPTargets: a node registered
// with its providerID and no address (as the node controller writes them,
// in two writes) reaches an IP-target NLB of one of our classes once its
// address arrives. The load-balancer controller re-targets, as upstream's,
// on a change of the set of nodes; an address change is the router's
// node-address re-sync, which left out every Service with a
// loadBalancerClass, ours included: the node never became a target.
func TestAddressAfterProviderIDReachesClassedIPTargets(t *testing.T) {
	svc := utilt.NewService("web", utilt.WithClass(awsIPClass))
	e, f := startAWS(t, envOptions{nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond}, *svc)
	waitFor(t, time.Minute, "the NLB with worker-0 as an IP target", func() error {
		if s := e.get(t, "web"); len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no address yet; events %v", e.events(t, "web"))
		}
		if got := ipTargets(f); strings.Join(got, ",") != "10.0.0.10" {
			return fmt.Errorf("IP targets %v", got)
		}
		return nil
	})

	n := utilt.NewNode("worker-1", utilt.WithProviderID("baremetal://worker-1"))
	n, err := e.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.11"}}
	if _, err := e.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "worker-1's address registered", func() error {
		for _, ip := range ipTargets(f) {
			if ip == "10.0.0.11" {
				return nil
			}
		}
		return fmt.Errorf("IP targets %v", ipTargets(f))
	})
}

func (c routerTargets) RetargetsOnAddressChange(svc *corev1.Service, backend string, old, node *corev1.Node) bool {
	return c.routerCloud.(AddressRetargeter).RetargetsOnAddressChange(svc, backend, old, node) //nolint:forcetypeassert // the router is an AddressRetargeter.
}

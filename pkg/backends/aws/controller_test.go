package aws

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	"k8s.io/component-base/featuregate"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws/awsfake"
)

// runNodeControllers runs the upstream cloud-node and cloud-node-lifecycle
// controllers against the backend over a fake clientset holding nodes.
func runNodeControllers(t *testing.T, c *Cloud, nodes ...*corev1.Node) *fake.Clientset {
	t.Helper()
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	for _, n := range nodes {
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	nodeInformer := factory.Core().V1().Nodes()
	cnc, err := nodecontroller.NewCloudNodeController(nodeInformer, client, c, time.Second, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := nodelifecycle.NewCloudNodeLifecycleController(nodeInformer, client, c, 200*time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	metrics := controllersmetrics.NewControllerManagerMetrics("test")
	var wg sync.WaitGroup
	wg.Go(func() { cnc.RunWithContext(ctx, metrics) })
	wg.Go(func() { lc.Run(ctx, metrics) })
	t.Cleanup(func() { cancel(); wg.Wait(); factory.Shutdown() })
	return client
}

// kubeletNode is a node as a kubelet with --cloud-provider=external
// registers it: tainted uninitialized and not ready.
func kubeletNode(name string, tweaks ...nodeTweak) *corev1.Node {
	base := []nodeTweak{func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	}}
	return newNode(name, append(base, tweaks...)...)
}

func getNode(t *testing.T, client *fake.Clientset, name string) (*corev1.Node, bool) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return n, true
}

// eventually polls cond for up to 30 s.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, tn := range n.Spec.Taints {
		if tn.Key == key {
			return true
		}
	}
	return false
}

func fastCache(s *Settings) { s.InstanceCacheTTL = &metav1.Duration{Duration: 100 * time.Millisecond} }

func TestNodeControllers(t *testing.T) {
	e := newEnv(t, fastCache)
	byDNS := e.addInstance(1)
	byName := e.addInstance(2)
	stopped := e.addInstance(3)
	gone := e.addInstance(4)
	client := runNodeControllers(t, e.cloud,
		kubeletNode(byDNS.PrivateDNSName),
		kubeletNode(byName.ID),
		newNode("stopped", notReady, withProviderID(providerID(stopped.Zone, stopped.ID))),
		newNode("gone", notReady, withProviderID(providerID(gone.Zone, gone.ID))),
		newNode("ready", withProviderID(providerID(gone.Zone, gone.ID))),
	)

	for _, in := range []awsfake.Instance{byDNS, byName} {
		name := in.PrivateDNSName
		if in.ID == byName.ID {
			name = in.ID
		}
		eventually(t, "node "+name+" initialised", func() error {
			n, _ := getNode(t, client, name)
			if n == nil || hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) {
				return fmt.Errorf("still tainted: %+v", n)
			}
			if n.Spec.ProviderID != providerID(in.Zone, in.ID) || n.Labels[corev1.LabelTopologyZone] != in.Zone ||
				n.Labels[corev1.LabelTopologyRegion] != testRegion || n.Labels[corev1.LabelInstanceTypeStable] != "m5.large" || n.Labels[ZoneIDLabel] != in.ZoneID {
				return fmt.Errorf("providerID %q labels %v", n.Spec.ProviderID, n.Labels)
			}
			if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Address != in.PrivateIPs[0] {
				return fmt.Errorf("addresses %v", n.Status.Addresses)
			}
			return nil
		})
	}

	e.fake.SetInstanceState(stopped.ID, "stopped")
	eventually(t, "stopped node tainted shutdown", func() error {
		if n, _ := getNode(t, client, "stopped"); n == nil || !hasTaint(n, cloudproviderapi.TaintNodeShutdown) {
			return fmt.Errorf("not tainted: %+v", n)
		}
		return nil
	})

	e.fake.SetOutage(true)
	e.fake.SetInstanceState(gone.ID, "terminated")
	time.Sleep(time.Second)
	if _, ok := getNode(t, client, "gone"); !ok {
		t.Fatal("node deleted during an outage")
	}
	e.fake.SetOutage(false)
	eventually(t, "terminated node deleted", func() error {
		if _, ok := getNode(t, client, "gone"); ok {
			return fmt.Errorf("still there")
		}
		return nil
	})
	if _, ok := getNode(t, client, "stopped"); !ok {
		t.Error("stopped node deleted")
	}
}

// runServiceController runs the upstream service controller against the
// backend over client.
func runServiceController(t *testing.T, c *Cloud, client *fake.Clientset) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	ctrl, err := servicecontroller.New(c, client, factory.Core().V1().Services(), factory.Core().V1().Nodes(), testCluster, featuregate.NewFeatureGate())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { ctrl.Run(ctx, 2, controllersmetrics.NewControllerManagerMetrics("test")) })
	t.Cleanup(func() { cancel(); wg.Wait(); factory.Shutdown() })
}

// TestServiceControllerVSphereOnAWS is the mission's headline case: the
// cluster's nodes are vSphere VMs linked to the VPC (plus one EC2
// instance); a Service gets an NLB whose IP targets are exactly the nodes'
// addresses; adding a node registers a target; an outage deletes nothing;
// deleting the Service leaves nothing in AWS.
func TestServiceControllerVSphereOnAWS(t *testing.T) {
	e := newEnv(t)
	nodes := append(otherNodes(2), e.awsNodes(1, 1)...)
	client := fake.NewClientset()
	ctx := context.Background()
	for _, n := range nodes {
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	runServiceController(t, e.cloud, client)
	svc := newService("web")
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Service gets the NLB's DNS name", func() error {
		s, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet (%v)", err)
		}
		if lbs := e.fake.LoadBalancers(); len(lbs) != 1 || s.Status.LoadBalancer.Ingress[0].Hostname != lbs[0].DNSName {
			return fmt.Errorf("ingress %v, load balancers %+v", s.Status.LoadBalancer.Ingress, lbs)
		}
		return nil
	})
	wantTargets := func(want string) func() error {
		return func() error {
			tgs := e.fake.TargetGroups()
			if len(tgs) != 1 || tgs[0].TargetType != targetIP || strings.Join(tgs[0].Targets, ",") != want {
				return fmt.Errorf("target groups %+v, want ip targets %s", tgs, want)
			}
			return nil
		}
	}
	eventually(t, "IP targets are the nodes' addresses", wantTargets("10.0.11.11:30080,192.168.10.1:30080@all,192.168.10.2:30080@all"))

	extra := newNode("vm-z", withProviderID("vsphere://4201-z"), withInternalIP("192.168.10.9"))
	if _, err := client.CoreV1().Nodes().Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "new node registered", wantTargets("10.0.11.11:30080,192.168.10.1:30080@all,192.168.10.2:30080@all,192.168.10.9:30080@all"))

	before := e.fake.ResourceCount()
	e.fake.SetOutage(true)
	markDeleted(t, client, "web")
	time.Sleep(500 * time.Millisecond)
	if n := e.fake.ResourceCount(); n != before {
		t.Fatalf("resources changed during an outage: %d -> %d", before, n)
	}
	e.fake.SetOutage(false)
	eventually(t, "nothing left in AWS", func() error {
		if n := e.fake.ResourceCount(); n != 0 {
			return fmt.Errorf("%d resources left", n)
		}
		s, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(s.Finalizers) > 0 {
			return fmt.Errorf("finalizers %v (%v)", s.Finalizers, err)
		}
		return nil
	})
}

// markDeleted does what the API server does on a delete of a Service with
// a finalizer (the fake clientset deletes at once): it sets the deletion
// timestamp.
func markDeleted(t *testing.T, client *fake.Clientset, name string) {
	t.Helper()
	ctx := context.Background()
	s, err := client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	s.DeletionTimestamp = &now
	if _, err := client.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

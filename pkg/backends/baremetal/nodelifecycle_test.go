package baremetal

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
)

func notReadyNode(name, providerID string) *corev1.Node {
	n := newNode(name, providerID)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	return n
}

func readyNode(name, providerID string) *corev1.Node {
	n := newNode(name, providerID)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

// TestNodeLifecycle drives the upstream node-lifecycle controller against
// the backend: only a NotReady node whose providerID names a machine the
// inventory does not list is deleted; a listed machine, another cloud's node
// and a malformed providerID are kept and never shutdown-tainted.
func TestNodeLifecycle(t *testing.T) {
	keep := []*corev1.Node{
		notReadyNode("bm-1", "baremetal://bm-1"),
		notReadyNode("renamed", "baremetal://bm-2"),
		notReadyNode("aws-1", "aws:///us-east-1a/i-1"),
		notReadyNode("odd", "baremetal:///bm-1"),
		readyNode("ready-gone", "baremetal://gone-too"),
	}
	gone := notReadyNode("gone", "baremetal://gone")
	objs := []runtime.Object{gone}
	for _, n := range keep {
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	cloud := newTestCloud(t, validSection)
	factory := informers.NewSharedInformerFactory(client, 0)
	ctrl, err := nodelifecycle.NewCloudNodeLifecycleController(factory.Core().V1().Nodes(), client, cloud, 50*time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { ctrl.Run(ctx, controllersmetrics.NewControllerManagerMetrics("test")) })
	defer func() { cancel(); wg.Wait(); factory.Shutdown() }()

	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Nodes().Get(ctx, "gone", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("the node of a machine absent from the inventory was not deleted")
	}
	time.Sleep(300 * time.Millisecond) // several more monitor periods
	for _, n := range keep {
		got, err := client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("node %s (%s): %v", n.Name, n.Spec.ProviderID, err)
			continue
		}
		for _, taint := range got.Spec.Taints {
			if taint.Key == nodelifecycle.ShutdownTaint.Key {
				t.Errorf("node %s got the shutdown taint", n.Name)
			}
		}
	}
}

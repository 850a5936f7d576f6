// Package testutil holds small helpers the backends' controller tests share.
package testutil

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
)

// Eventually polls cond every 50 ms until it returns nil, failing the test
// with what and cond's last error once timeout has passed.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	EventuallyEvery(t, timeout, 50*time.Millisecond, what, cond)
}

// EventuallyEvery is Eventually polling every interval.
func EventuallyEvery(t testing.TB, timeout, interval time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(interval)
	}
}

// GetNode returns the named Node, or false when it does not exist; any
// other error fails the test.
func GetNode(t testing.TB, client kubernetes.Interface, name string) (*corev1.Node, bool) {
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

// RunNodeControllers runs the upstream cloud-node controller (status
// updates every second) and cloud-node-lifecycle controller (every
// lifecyclePeriod) against cloud, over a fake clientset holding nodes. They
// stop when the test ends.
func RunNodeControllers(t testing.TB, cloud cloudprovider.Interface, lifecyclePeriod time.Duration, nodes ...*corev1.Node) *fake.Clientset {
	t.Helper()
	client := ShareRESTMapper(fake.NewClientset())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, n := range nodes {
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	nodeInformer := factory.Core().V1().Nodes()
	cnc, err := nodecontroller.NewCloudNodeController(nodeInformer, client, cloud, time.Second, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := nodelifecycle.NewCloudNodeLifecycleController(nodeInformer, client, cloud, lifecyclePeriod, 2)
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

// Unavailable ends a test whose environment is missing (the control-plane
// binaries, helm, the OpenStack stack): a skip on a developer's machine,
// a failure when CI is set, where everything must run.
func Unavailable(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

package baremetal

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// restartPool holds exactly 128 addresses.
const restartPool = "addressPools: [{name: p, addresses: [10.0.0.1-10.0.0.128]}]"

// runServiceController starts the upstream service controller with a new
// backend over client, the way the CCM wires them (SetInformers before the
// factory starts). The returned stop function waits for it to end.
func runServiceController(t *testing.T, client kubernetes.Interface) (*Cloud, func()) {
	t.Helper()
	return runServiceControllerWith(t, client, restartPool)
}

// runServiceControllerWith is runServiceController with a backend built from
// section, initialised with a client builder over client (for its events).
func runServiceControllerWith(t *testing.T, client kubernetes.Interface, section string) (*Cloud, func()) {
	t.Helper()
	cloud := newTestCloud(t, section)
	stopEvents := make(chan struct{})
	cloud.Initialize(testutil.NewClientBuilder(client), stopEvents)
	stopController := testutil.StartServiceController(t, cloud, client, "c1", 5)
	var once sync.Once
	stop := func() {
		stopController()
		once.Do(func() { close(stopEvents) })
	}
	t.Cleanup(stop)
	return cloud, stop
}

func createServices(t *testing.T, client kubernetes.Interface, prefix string, n int) {
	t.Helper()
	for i := range n {
		svc := newService(fmt.Sprintf("%s-%03d", prefix, i))
		if _, err := client.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitForAddresses waits until want Services have an address and returns
// the address of each.
func waitForAddresses(t *testing.T, client kubernetes.Interface, want int) map[string]string {
	t.Helper()
	var got map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got = map[string]string{}
		for _, s := range list.Items {
			if ips := ingressIPs(&s.Status.LoadBalancer); ips != "" {
				got[s.Name] = ips
			}
		}
		return len(got) >= want, nil
	})
	if err != nil {
		t.Fatalf("%d of %d Services got an address: %v", len(got), want, err)
	}
	return got
}

func assertUnique(t *testing.T, addrs map[string]string) {
	t.Helper()
	owner := map[string]string{}
	for svc, ip := range addrs {
		if prev, dup := owner[ip]; dup {
			t.Fatalf("address %s given to both %s and %s", ip, prev, svc)
		}
		owner[ip] = svc
	}
}

// TestServiceControllerRestart drives the upstream service controller: 100
// Services get addresses; the controller and backend stop; 28 more Services
// are created; a new controller and backend start over the same API state.
// The new backend must know the 100 addresses before it hands out any, so
// every Service ends with its own address, the first 100 unchanged, and a
// 129th Service is refused with a clear exhaustion error.
func TestServiceControllerRestart(t *testing.T) {
	// No Node: the backend ignores nodes, and upstream's service controller
	// v0.37 has a data race between its node and service workers
	// (serviceCache.allServices against cachedService.state) that -race
	// reports whenever a node event arrives during a service sync.
	client := fake.NewClientset()

	_, stop := runServiceController(t, client)
	createServices(t, client, "before", 100)
	first := waitForAddresses(t, client, 100)
	stop()
	assertUnique(t, first)

	createServices(t, client, "after", 28)
	cloud, stop := runServiceController(t, client)
	defer stop()
	all := waitForAddresses(t, client, 128)
	assertUnique(t, all)
	for name, ip := range first {
		if all[name] != ip {
			t.Errorf("%s moved from %s to %s across the restart", name, ip, all[name])
		}
	}
	if n := cloud.lb.holders(); n != 128 {
		t.Errorf("backend holds addresses for %d Services, want 128", n)
	}

	createServices(t, client, "overflow", 1)
	waitForEvent(t, client, "overflow-000", "pools p (128 of 128 in use) are exhausted")
	if got := waitForAddresses(t, client, 128); len(got) != 128 {
		t.Errorf("%d Services have addresses after the overflow, want 128", len(got))
	}
}

// waitForEvent waits for an event on the Service whose message contains msg.
func waitForEvent(t *testing.T, client kubernetes.Interface, name, msg string) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name {
				seen = append(seen, e.Reason+": "+e.Message)
				if strings.Contains(e.Message, msg) {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no event on %s containing %q; saw %q", name, msg, seen)
	}
}

// TestLateStatusOfAnotherClassIsTaken drives the upstream service controller:
// after the backend's first allocation, a Service of another
// loadBalancerClass (MetalLB's, say) gets an address of the pool's range in
// its status, and one of kube-vip's requests the next; the next bare-metal
// Service must get neither.
func TestLateStatusOfAnotherClassIsTaken(t *testing.T) {
	client := fake.NewClientset()
	_, stop := runServiceController(t, client)
	defer stop()
	ctx := context.Background()

	createServices(t, client, "first", 1)
	if got := waitForAddresses(t, client, 1); got["first-000"] != "10.0.0.1" {
		t.Fatalf("first Service got %v, want 10.0.0.1", got)
	}
	// The next address the backend would hand out goes to a Service it
	// never serves, after the backend has started.
	other := newService("metallb", func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("metallb.io/metallb") })
	other, err := client.CoreV1().Services("default").Create(ctx, other, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.0.2"}}
	if _, err := client.CoreV1().Services("default").UpdateStatus(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// kube-vip's Service requests the address after that; kube-vip has not
	// written its status yet.
	vip := newService("kube-vip", withAnnotation("kube-vip.io/loadbalancerIPs", "10.0.0.3"), func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("kube-vip.io/kube-vip-class") })
	if _, err := client.CoreV1().Services("default").Create(ctx, vip, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	createServices(t, client, "second", 1)
	all := waitForAddresses(t, client, 3)
	assertUnique(t, all)
	if all["metallb"] != "10.0.0.2" {
		t.Errorf("the other class's Service shows %q, want 10.0.0.2 untouched", all["metallb"])
	}
	if all["second-000"] != "10.0.0.4" {
		t.Errorf("second Service got %q, want 10.0.0.4: 10.0.0.2 is in a status, 10.0.0.3 requested by kube-vip's Service", all["second-000"])
	}
}

// TestAddressOutsidePoolsReplaced drives the upstream service controller
// through a restart whose config no longer covers a Service's address: the
// Service gets an address from the new pool and a Warning event saying
// which address was replaced and why; the old address is never kept.
func TestAddressOutsidePoolsReplaced(t *testing.T) {
	client := fake.NewClientset()
	_, stop := runServiceController(t, client)
	createServices(t, client, "svc", 1)
	if got := waitForAddresses(t, client, 1); got["svc-000"] != "10.0.0.1" {
		t.Fatalf("Service got %v, want 10.0.0.1", got)
	}
	stop()

	_, stop = runServiceControllerWith(t, client, "addressPools: [{name: p, addresses: [10.0.1.1-10.0.1.8]}]")
	defer stop()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		svc, err := client.CoreV1().Services("default").Get(ctx, "svc-000", metav1.GetOptions{})
		return err == nil && ingressIPs(&svc.Status.LoadBalancer) == "10.0.1.1", err
	})
	if err != nil {
		t.Fatalf("the Service's address outside the new pool was not replaced by 10.0.1.1: %v", err)
	}
	waitForEvent(t, client, "svc-000", "Address [10.0.0.1] in the Service's status is in none of the address pools")
	waitForReason(t, client, "svc-000", ReasonIPReplaced)
}

// waitForReason waits for a Warning event with reason on the named object.
func waitForReason(t *testing.T, client kubernetes.Interface, name, reason string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Warning event %s on %s: %v", reason, name, err)
	}
}

// TestTypeChangeReleases drives the upstream service controller: a Service
// that stops being a LoadBalancer, and one that is deleted, leave nothing
// held once the controller has cleared the status or the Service is gone
// (addresses a status shows stay taken until then).
func TestTypeChangeReleases(t *testing.T) {
	client := fake.NewClientset()
	cloud, stop := runServiceController(t, client)
	defer stop()
	ctx := context.Background()
	createServices(t, client, "svc", 2)
	waitForAddresses(t, client, 2)

	svc, err := client.CoreV1().Services("default").Get(ctx, "svc-000", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	if _, err := client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Services("default").Delete(ctx, "svc-001", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cloud.lb.holders() == 0, nil
	})
	if err != nil {
		t.Fatalf("the backend still holds addresses for %d Services", cloud.lb.holders())
	}
}

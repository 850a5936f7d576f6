package baremetal

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestKubeVIPAnnounce drives the upstream service controller over a backend
// with announce: kube-vip. The automatically assigned address is written to
// kube-vip.io/loadbalancerIPs as well as the status; the annotation change
// makes the controller ensure the Service once more, which writes nothing,
// so the Service's writes stop (no loop). Turning the Service into a
// ClusterIP Service releases the address and removes the annotation; a
// value the user wrote is never removed.
func TestKubeVIPAnnounce(t *testing.T) {
	client := fake.NewClientset()
	var patches, statusWrites countingReactor
	client.PrependReactor("patch", "services", patches.count)
	client.PrependReactor("update", "services", statusWrites.count)
	_, stop := runServiceControllerWith(t, client, "announce: kube-vip\naddressPools: [{name: p, addresses: [10.0.0.1-10.0.0.8]}]")
	defer stop()
	ctx := context.Background()
	svcs := client.CoreV1().Services("default")
	if _, err := svcs.Create(ctx, newService("auto"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mine := newService("mine", withAnnotation(kubeVIPLoadBalancerIPs, "10.0.0.5"), withIPs("10.0.0.5"))
	if _, err := svcs.Create(ctx, mine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitService(t, client, "auto", func(s *corev1.Service) bool {
		ip := ingressIPs(&s.Status.LoadBalancer)
		return ip != "" && s.Annotations[kubeVIPLoadBalancerIPs] == ip
	})
	waitService(t, client, "mine", func(s *corev1.Service) bool { return ingressIPs(&s.Status.LoadBalancer) == "10.0.0.5" })

	// Converged: no more writes over a quiet period.
	time.Sleep(500 * time.Millisecond)
	p, u := patches.get(), statusWrites.get()
	time.Sleep(2 * time.Second)
	if p2, u2 := patches.get(), statusWrites.get(); p2 != p || u2 != u {
		t.Errorf("the Service kept being written: patches %d -> %d, updates %d -> %d", p, p2, u, u2)
	}

	for _, name := range []string{"auto", "mine"} {
		s, err := svcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Type = corev1.ServiceTypeClusterIP
		if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitService(t, client, "auto", func(s *corev1.Service) bool {
		_, has := s.Annotations[kubeVIPLoadBalancerIPs]
		return !has && ingressIPs(&s.Status.LoadBalancer) == ""
	})
	waitService(t, client, "mine", func(s *corev1.Service) bool { return ingressIPs(&s.Status.LoadBalancer) == "" })
	if s, _ := svcs.Get(ctx, "mine", metav1.GetOptions{}); s.Annotations[kubeVIPLoadBalancerIPs] != "10.0.0.5" {
		t.Errorf("the user's kube-vip.io/loadbalancerIPs was changed to %q", s.Annotations[kubeVIPLoadBalancerIPs])
	}
}

type countingReactor struct {
	n  int
	mu chan struct{}
}

func (c *countingReactor) count(k8stesting.Action) (bool, runtime.Object, error) {
	c.lock()
	c.n++
	c.unlock()
	return false, nil, nil
}

func (c *countingReactor) lock() {
	if c.mu == nil {
		c.mu = make(chan struct{}, 1)
	}
	c.mu <- struct{}{}
}
func (c *countingReactor) unlock() { <-c.mu }

func (c *countingReactor) get() int {
	c.lock()
	defer c.unlock()
	return c.n
}

func waitService(t *testing.T, client *fake.Clientset, name string, cond func(*corev1.Service) bool) {
	t.Helper()
	var last *corev1.Service
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = s
		return cond(s), nil
	})
	if err != nil {
		t.Fatalf("Service %s: %v; last seen annotations %v status %v", name, err, last.Annotations, last.Status.LoadBalancer)
	}
}

// kubeVIPDualSection announces through kube-vip from a dual-stack pool.
const kubeVIPDualSection = "announce: kube-vip\naddressPools: [{name: p, addresses: [10.0.0.1-10.0.0.8, \"fd00::1-fd00::8\"]}]"

// TestKubeVIPUserRequest drives the upstream service controller over a
// backend with announce: kube-vip: a kube-vip.io/loadbalancerIPs value the
// user wrote is the Service's request, read as kube-vip reads it
// (comma-separated, white space trimmed, one address per family, winning
// over spec.loadBalancerIP), so the status shows exactly what kube-vip
// announces. Editing it moves the Service. A value kube-vip would read
// otherwise than as pool addresses (a hostname, 0.0.0.0 for DHCP, two of a
// family, empty) or one that contradicts multicloud-ccm.io/load-balancer-ips
// is a Warning naming the annotation and the fix, and nothing is assigned
// or written.
func TestKubeVIPUserRequest(t *testing.T) {
	client := fake.NewClientset()
	cloud, stop := runServiceControllerWith(t, client, kubeVIPDualSection)
	defer stop()
	ctx := context.Background()
	svcs := client.CoreV1().Services("default")
	dual := withFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv6Protocol, corev1.IPv4Protocol)
	create := func(s *corev1.Service) {
		t.Helper()
		if _, err := svcs.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(newService("single", withAnnotation(kubeVIPLoadBalancerIPs, "10.0.0.5")))
	create(newService("spec", withAnnotation(kubeVIPLoadBalancerIPs, "10.0.0.3"), func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.0.2" }))
	create(newService("dual", dual, withAnnotation(kubeVIPLoadBalancerIPs, " 10.0.0.6 , fd00::6")))
	waitService(t, client, "single", func(s *corev1.Service) bool { return ingressIPs(&s.Status.LoadBalancer) == "10.0.0.5" })
	waitService(t, client, "spec", func(s *corev1.Service) bool { return ingressIPs(&s.Status.LoadBalancer) == "10.0.0.3" })
	waitService(t, client, "dual", func(s *corev1.Service) bool { return ingressIPs(&s.Status.LoadBalancer) == "fd00::6,10.0.0.6" })
	for _, name := range []string{"single", "spec", "dual"} {
		s, err := svcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, marked := s.Annotations[KubeVIPAnnouncedAnnotation]; marked {
			t.Errorf("%s: the user's request was marked as the backend's: %v", name, s.Annotations)
		}
	}

	// The user edits the request: the Service moves, its old address is free.
	s, err := svcs.Get(ctx, "single", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Annotations[kubeVIPLoadBalancerIPs] = "10.0.0.4"
	if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitService(t, client, "single", func(s *corev1.Service) bool { return ingressIPs(&s.Status.LoadBalancer) == "10.0.0.4" })

	bad := []struct{ name, value, msg string }{
		{"hostname", "vip.example.com", `"vip.example.com" is not an IP address`},
		{"dhcp", "0.0.0.0", "asks kube-vip for an address by DHCP"},
		{"two-v4", "10.0.0.7,10.0.0.8", "10.0.0.7 and 10.0.0.8 are both IPv4"},
		{"empty", "", "is empty"},
		{"empty-entry", "10.0.0.7,", "empty entry"},
	}
	for _, b := range bad {
		create(newService(b.name, withAnnotation(kubeVIPLoadBalancerIPs, b.value)))
	}
	create(newService("contradicts", withAnnotation(kubeVIPLoadBalancerIPs, "10.0.0.7"), withIPs("10.0.0.8")))
	create(newService("taken", withAnnotation(kubeVIPLoadBalancerIPs, "10.0.0.6")))
	bad = append(bad,
		struct{ name, value, msg string }{"contradicts", "10.0.0.7", "multicloud-ccm.io/load-balancer-ips asks for [10.0.0.8]"},
		struct{ name, value, msg string }{"taken", "10.0.0.6", "in use by Service default/dual"})
	for _, b := range bad {
		waitForEvent(t, client, b.name, b.msg)
		if b.name != "taken" {
			waitForEvent(t, client, b.name, kubeVIPLoadBalancerIPs)
		}
		s, err := svcs.Get(ctx, b.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ip := ingressIPs(&s.Status.LoadBalancer); ip != "" || s.Annotations[kubeVIPLoadBalancerIPs] != b.value || s.Annotations[KubeVIPAnnouncedAnnotation] != "" {
			t.Errorf("%s: a refused request changed the Service: status %q, annotations %v", b.name, ip, s.Annotations)
		}
		if _, exists, err := cloud.lb.GetLoadBalancer(ctx, "c1", s); exists || err != nil {
			t.Errorf("%s: the backend holds addresses for a refused request (%v)", b.name, err)
		}
	}
}

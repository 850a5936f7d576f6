package lbcontroller

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// A Service's lifecycle across backends under the default controller
// (classless mode): moves, drains, moves back, several backends, reloads.
// Each test drives the controller over the router on an API server that
// keeps resourceVersions, as a real one does.

// metals is a config with two bare-metal backends of their own pools and
// no default backend; extra is appended to loadBalancer (YAML, indented
// two spaces).
func metals(extra string) string {
	return `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  drainPeriod: 0s
` + extra + `backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools: [{name: lan, addresses: ["192.0.2.0/28"]}]
- name: metal2
  type: baremetal
  baremetal:
    inventory: [{name: worker-9, addresses: [{type: InternalIP, address: 10.0.0.99}]}]
    addressPools: [{name: other, addresses: ["198.51.100.0/28"]}]
`
}

// edit changes the Service's annotations (nil value: removed), retried on
// a conflict.
func (e *env) edit(t *testing.T, name string, ann map[string]*string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := e.client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for k, v := range ann {
			if v == nil {
				delete(s.Annotations, k)
			} else {
				s.Annotations[k] = *v
			}
		}
		_, err = e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// moveTo sets the Service's load-balancer-backend annotation.
func (e *env) moveTo(t *testing.T, name, backends string) {
	t.Helper()
	e.edit(t, name, map[string]*string{string(annotation.LoadBalancerBackend): &backends})
}

// ingresses lists the Service's status addresses, comma-separated.
func ingresses(s *corev1.Service) string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP+in.Hostname)
	}
	return strings.Join(out, ",")
}

// drainingOf is the Service's draining record.
func drainingOf(s *corev1.Service) string {
	return s.Annotations[string(annotation.LoadBalancerDraining)]
}

// webOn creates web on backend with the drain period given and waits for
// its address.
func webOn(t *testing.T, e *env, backend, drain string) string {
	t.Helper()
	s := service("web", nil)
	s.Annotations = map[string]string{string(annotation.LoadBalancerBackend): backend, string(annotation.LoadBalancerDrain): drain}
	e.create(t, s)
	eventually(t, "web addressed", addressed(e, t, "web"))
	return ingress(e.get(t, "web"))
}

// state is the Service's status addresses, draining record and
// external-dns target, for messages.
func state(s *corev1.Service) string {
	return fmt.Sprintf("status %q, draining %q, dns target %q, record %q", ingresses(s), drainingOf(s),
		s.Annotations["external-dns.kubernetes.io/target"], s.Annotations[string(annotation.LoadBalancerBackends)])
}

// TestMoveBackDuringDrainKeepsNewDrain (issue 40, defect 1): a Service
// moved from metal to metal2 with a drain, then back to metal while metal
// still drains, serves from metal again and drains metal2: the draining
// record names metal2, external-dns's target lists metal's address only,
// and metal2's address stays in the status (announced from it) after
// metal's. The deferred write of the served annotations worked from the
// copy the controller synced, older than the router's drain write, and
// deleted both.
func TestMoveBackDuringDrainKeepsNewDrain(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	ipA := webOn(t, e, "metal", "1m")
	e.moveTo(t, "web", "metal2")
	var ipB string
	eventually(t, "metal draining, metal2 serving", func() error {
		s := e.get(t, "web")
		if !strings.HasPrefix(drainingOf(s), "metal=") || !strings.HasPrefix(ingress(s), "198.51.100.") {
			return fmt.Errorf("%s", state(s))
		}
		ipB = ingress(s)
		return nil
	})
	e.moveTo(t, "web", "metal")
	eventually(t, "metal serving again, metal2 draining", func() error {
		s := e.get(t, "web")
		if ingresses(s) != ipA+","+ipB || !strings.HasPrefix(drainingOf(s), "metal2=") || strings.Contains(drainingOf(s), "metal=") ||
			s.Annotations["external-dns.kubernetes.io/target"] != ipA || s.Annotations[string(annotation.LoadBalancerServedBy)] != "metal" {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	// Stays so: nothing later wipes the drain.
	time.Sleep(300 * time.Millisecond) // a state that must last: no condition to wait for
	if s := e.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal2=") || ingresses(s) != ipA+","+ipB {
		t.Fatalf("after the move back: %s", state(s))
	}
}

// TestDrainAgainAfterCancelGetsItsPeriod (issue 40, defect 2): metal's
// drain is cancelled by a move back; once its old end has passed, a new
// move off metal drains it again for the full period: its address stays
// in the status and reserved, and metal is not deleted in that sync. The
// router kept the cancelled drain's end in memory (the deferred write
// never updated it), so the second drain ended at once.
func TestDrainAgainAfterCancelGetsItsPeriod(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	ipA := webOn(t, e, "metal", "2s")
	e.moveTo(t, "web", "metal2")
	var end string
	eventually(t, "metal draining", func() error {
		s := e.get(t, "web")
		if !strings.HasPrefix(drainingOf(s), "metal=") {
			return fmt.Errorf("%s", state(s))
		}
		end = strings.TrimPrefix(drainingOf(s), "metal=")
		return nil
	})
	e.moveTo(t, "web", "metal")
	eventually(t, "metal serving again, metal2 drained", func() error {
		s := e.get(t, "web")
		if ingresses(s) != ipA || drainingOf(s) != "" || s.Annotations[string(annotation.LoadBalancerBackends)] != "metal" {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	at, err := time.Parse(time.RFC3339, end)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the cancelled drain's end passed", func() error {
		if time.Now().Before(at.Add(time.Second)) {
			return fmt.Errorf("not before %s", at)
		}
		return nil
	})
	e.moveTo(t, "web", "metal2")
	eventually(t, "metal draining again", func() error {
		s := e.get(t, "web")
		if !strings.HasPrefix(drainingOf(s), "metal=") || !strings.HasSuffix(ingresses(s), ","+ipA) {
			return fmt.Errorf("%s; events %v", state(s), e.events(t, "web"))
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // a state that must last: no condition to wait for
	s := e.get(t, "web")
	drained := slices.ContainsFunc(e.events(t, "web"), func(ev string) bool { return strings.Contains(ev, "backend metal drained") })
	if drained || !strings.HasSuffix(ingresses(s), ","+ipA) {
		t.Errorf("the second drain of metal ended at once: %s; events %v", state(s), e.events(t, "web"))
	}
}

// TestAddedEventUnderDefaultController (issue 40, defect 4): a move to
// another backend, and a new Service served by two backends, record a
// LoadBalancerAdded event for each backend added, as docs/routing.md and
// docs/migrating.md show. The controller writes the record with its
// finalizer before EnsureLoadBalancer, so the router, deciding from the
// Service it was handed, never saw a backend added.
func TestAddedEventUnderDefaultController(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "0")
	if ev := hasEvent(e.events(t, "web"), "LoadBalancerAdded"); ev != "" {
		t.Errorf("a new Service with one backend got %q", ev)
	}
	e.moveTo(t, "web", "metal2")
	eventually(t, "LoadBalancerAdded for metal2", func() error {
		if ev := hasEvent(e.events(t, "web"), "LoadBalancerAdded"); !strings.HasSuffix(ev, "backend metal2") {
			return fmt.Errorf("events %v", e.events(t, "web"))
		}
		return nil
	})

	both := service("both", nil)
	both.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal,metal2"}
	e.create(t, both)
	eventually(t, "both addressed", addressed(e, t, "both"))
	eventually(t, "LoadBalancerAdded for metal and metal2", func() error {
		if n := e.countEvents(t, "both", "LoadBalancerAdded"); n != 2 {
			return fmt.Errorf("%d events: %v", n, e.events(t, "both"))
		}
		return nil
	})
}

// TestForeignAddressKeptUnderDefaultController (issue 40, defect 8): with
// no defaultBackend, a classless Service with no annotation and no record
// whose address another controller wrote inside a bare-metal pool is left
// alone: the address stays in its status and bare metal keeps it taken.
func TestForeignAddressKeptUnderDefaultController(t *testing.T) {
	svc := service("metallb", nil)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.14"}}
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true}, svc)
	// A second Service, created after: the informer's list queued the
	// first before it.
	webOn(t, e, "metal", "0")
	s := e.get(t, "metallb")
	if len(s.Finalizers) > 0 {
		t.Errorf("another controller's Service was given finalizers %v", s.Finalizers)
	}
	if got := ingresses(s); got != "192.0.2.14" {
		t.Errorf("status = %q, want the other controller's 192.0.2.14 kept", got)
	}
	if s.Annotations[string(annotation.LoadBalancerBackends)] != "" {
		t.Errorf("another controller's Service was given a record: annotations %v", s.Annotations)
	}
	if web := ingress(e.get(t, "web")); web == "192.0.2.14" {
		t.Errorf("the other controller's address was handed to web")
	}
}

// TestReloadRemovingDrainingBackendWarns (issue 40, defect 7): a reload
// that removes a backend while it drains a Service's load balancer puts a
// Warning UnknownLoadBalancerBackend on the Service, as docs/migrating.md
// says: the drain stays pending until the backend is added back. It was
// left pending with no Warning.
func TestReloadRemovingDrainingBackendWarns(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, reloadable: true})
	webOn(t, e, "metal", "1m")
	e.moveTo(t, "web", "metal2")
	eventually(t, "metal draining", func() error {
		if s := e.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	doc := metals("")
	doc = doc[:strings.Index(doc, "- name: metal\n")] + doc[strings.Index(doc, "- name: metal2\n"):]
	e.reload(t, doc)
	eventually(t, "a Warning UnknownLoadBalancerBackend", func() error {
		if ev := hasEvent(e.events(t, "web"), "UnknownLoadBalancerBackend"); !strings.Contains(ev, `"metal"`) {
			return fmt.Errorf("events %v", e.events(t, "web"))
		}
		return nil
	})
	if s := e.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") {
		t.Errorf("the drain was dropped: %s", state(s))
	}
}

// touch edits a user annotation of the Service, so that it is synced in
// full, and waits for that sync.
func (e *env) touch(t *testing.T, name, value string) {
	t.Helper()
	n := e.cloud.ensures.Load()
	e.edit(t, name, map[string]*string{"example.com/touch": &value})
	eventually(t, "a full sync after the edit", func() error {
		if e.cloud.ensures.Load() == n {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}

// TestTwoBackendsNoReplacedWarning (issue 40, defect 6): a Service served
// by two bare-metal backends at once, and one moving from one to the
// other with a drain, get no Warning LoadBalancerIPReplaced on later
// syncs: each backend is handed the Service without the other's address
// in its status. Bare metal took the other backend's live address for a
// replaced address of its own, on every sync after the first.
func TestTwoBackendsNoReplacedWarning(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	both := service("both", nil)
	both.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal,metal2"}
	e.create(t, both)
	eventually(t, "both addresses", func() error {
		if s := e.get(t, "both"); len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	e.touch(t, "both", "1")
	e.touch(t, "both", "2")

	webOn(t, e, "metal", "1m")
	e.moveTo(t, "web", "metal2")
	eventually(t, "metal draining", func() error {
		if s := e.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	e.touch(t, "web", "1")
	for _, name := range []string{"both", "web"} {
		if n := e.countEvents(t, name, "LoadBalancerIPReplaced"); n != 0 {
			t.Errorf("%s: %d LoadBalancerIPReplaced Warnings: %v", name, n, e.events(t, name))
		}
	}
}

// TestReloadResyncsEveryBackendOfAList (issue 40, defect 3): a reload
// that shrinks the pool of a backend serving Services together with
// another (the annotation metal,metal2, and a class with backends [metal,
// metal2]) re-syncs them, and they leave the addresses outside the pool.
// The reload compared the whole annotation and a class's single backend,
// never each backend of the list.
func TestReloadResyncsEveryBackendOfAList(t *testing.T) {
	classes := "  classes:\n  - {name: " + ourClass + ", backends: [metal, metal2]}\n"
	e := startEnv(t, envOptions{doc: metals(classes), classless: true, versioned: true, reloadable: true})
	listed := service("listed", nil)
	listed.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal,metal2"}
	e.create(t, listed)
	e.create(t, service("classed", ptrTo(ourClass)))
	for _, name := range []string{"listed", "classed"} {
		eventually(t, name+" has both addresses", func() error {
			if s := e.get(t, name); len(s.Status.LoadBalancer.Ingress) != 2 {
				return fmt.Errorf("%s", state(s))
			}
			return nil
		})
	}
	e.reload(t, strings.Replace(metals(classes), "198.51.100.0/28", "198.51.100.16/28", 1))
	for _, name := range []string{"listed", "classed"} {
		eventually(t, name+"'s metal2 address in the shrunk pool", func() error {
			s := e.get(t, name)
			if len(s.Status.LoadBalancer.Ingress) != 2 || !inPrefix(s.Status.LoadBalancer.Ingress[1].IP, "198.51.100.16/28") {
				return fmt.Errorf("%s", state(s))
			}
			return nil
		})
	}
}

// inPrefix reports whether ip lies in prefix.
func inPrefix(ip, prefix string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && netip.MustParsePrefix(prefix).Contains(a)
}

// TestDrainEndIsTheControllersSync (issue 40, DESIGN contract 14: timers
// enqueue, they do not write): under the default controller, the router's
// drain timer hands a drain's end to the controller, whose full sync ends
// the drain (LoadBalancerDrained, the record naming metal2 alone, the
// status without metal's address); the timer used to delete and write on
// its own, with no sync of the Service.
func TestDrainEndIsTheControllersSync(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "2s")
	e.moveTo(t, "web", "metal2")
	eventually(t, "metal draining", func() error {
		if s := e.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // the move's syncs settle: no condition to wait for
	ensures := e.cloud.ensures.Load()
	eventually(t, "the drain over", func() error {
		s := e.get(t, "web")
		if drainingOf(s) != "" || s.Annotations[string(annotation.LoadBalancerBackends)] != "metal2" || len(s.Status.LoadBalancer.Ingress) != 1 ||
			hasEvent(e.events(t, "web"), "LoadBalancerDrained") == "" {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	if n := e.cloud.ensures.Load() - ensures; n == 0 {
		t.Error("the drain ended with no sync of the Service: the timer ended it itself")
	}
}

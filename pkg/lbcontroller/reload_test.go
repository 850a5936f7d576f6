package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

const addedClass = "multicloud-ccm.io/added"

// twoMetals is cloudConfig's shape with two bare-metal backends of their
// own pools; classes is the loadBalancer.classes list (YAML flow).
func twoMetals(classes string) string {
	return `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  classes: ` + classes + `
backends:
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

// reload applies doc to e's Reloadable and tells the controller, as the
// binary's config watcher does.
func (e *env) reload(t *testing.T, doc string) {
	t.Helper()
	next, err := config.Parse([]byte(doc), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.rl.Apply(context.Background(), next)
	if err != nil {
		t.Fatal(err)
	}
	e.ctrl.Reloaded(e.cfg, next, ch)
	e.cfg = next
}

// TestReloadServesAddedClass: a Service of a class the config does not
// list stays untouched; once a reload adds the class it is served at once,
// without an edit or a restart. A reload moving a class to another backend
// re-syncs its Services, which move; one removing a class leaves its
// Services' load balancers alone.
func TestReloadServesAddedClass(t *testing.T) {
	e := startEnv(t, envOptions{doc: twoMetals(`[{name: ` + ourClass + `, backend: metal}]`), reloadable: true},
		service("waiting", ptrTo(addedClass)))
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "the served class's Service addressed", addressed(e, t, "web"))
	if s := e.get(t, "waiting"); len(s.Finalizers) > 0 || ingress(s) != "" {
		t.Fatalf("a Service of an unlisted class was touched: %v %q", s.Finalizers, ingress(s))
	}

	e.reload(t, twoMetals(`[{name: `+ourClass+`, backend: metal}, {name: `+addedClass+`, backend: metal}]`))
	eventually(t, "the added class's Service addressed", addressed(e, t, "waiting"))
	if ip := ingress(e.get(t, "waiting")); !strings.HasPrefix(ip, "192.0.2.") {
		t.Errorf("waiting got %s, want an address of metal's pool", ip)
	}

	e.reload(t, twoMetals(`[{name: `+ourClass+`, backend: metal}, {name: `+addedClass+`, backend: metal2}]`))
	eventually(t, "the moved class's Service in metal2's pool", func() error {
		s := e.get(t, "waiting")
		if ip := ingress(s); !strings.HasPrefix(ip, "198.51.100.") {
			return fmt.Errorf("address %q", ip)
		}
		// The address shows before the move is done: served-by names
		// the new backend in the sync after (write 2).
		if by := s.Annotations[string(annotation.LoadBalancerServedBy)]; by != "metal2" {
			return fmt.Errorf("served by %q", by)
		}
		return nil
	})

	// The move's last sync (its conditions naming metal2 alone) may still
	// ensure: count from when the ensures stop.
	ensures := quietEnsures(t, e)
	webIP := ingress(e.get(t, "web"))
	e.reload(t, twoMetals(`[{name: `+addedClass+`, backend: metal2}]`))
	time.Sleep(300 * time.Millisecond) // nothing may happen: no condition to wait for
	if n := e.cloud.ensures.Load(); n != ensures {
		t.Errorf("removing a class ensured %d times", n-ensures)
	}
	if s := e.get(t, "web"); ingress(s) != webIP {
		t.Errorf("removing its class changed web's address from %s to %q", webIP, ingress(s))
	}
}

// quietEnsures waits until the controller has made no EnsureLoadBalancer
// for 300 ms, and returns how many it made.
func quietEnsures(t *testing.T, e *env) int32 {
	t.Helper()
	last, since := e.cloud.ensures.Load(), time.Now()
	eventually(t, "the ensures stopped", func() error {
		if n := e.cloud.ensures.Load(); n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) < 300*time.Millisecond {
			return fmt.Errorf("%d ensures, still moving", last)
		}
		return nil
	})
	return last
}

// TestReloadConcernsOnlyItsServices: a reload that changes nothing a
// Service's routing depends on re-syncs none.
func TestReloadConcernsOnlyItsServices(t *testing.T) {
	doc := twoMetals(`[{name: ` + ourClass + `, backend: metal}]`)
	e := startEnv(t, envOptions{doc: doc, reloadable: true}, service("web", ptrTo(ourClass)))
	eventually(t, "addressed", addressed(e, t, "web"))
	time.Sleep(200 * time.Millisecond)
	ensures := e.cloud.ensures.Load()
	// metal2 rebuilt: web's class is metal's.
	e.reload(t, strings.Replace(doc, "10.0.0.99", "10.0.0.98", 1))
	time.Sleep(300 * time.Millisecond) // nothing may happen: no condition to wait for
	if n := e.cloud.ensures.Load(); n != ensures {
		t.Errorf("a reload not concerning web ensured it %d times", n-ensures)
	}
}

// TestRecreatedUnderSameName: a Service deleted (its finalizer removed by
// hand) and re-created under its name while the controller is busy with
// it, both events merged in one queued key: the old one's load balancer is
// deleted, as upstream's service controller does when the cached UID
// differs, and the new one gets its own.
func TestRecreatedUnderSameName(t *testing.T) {
	e := startEnv(t, envOptions{doc: cloudConfig, versioned: true})
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "addressed", addressed(e, t, "web"))
	old := e.get(t, "web")

	entered, gate := make(chan struct{}), make(chan struct{})
	e.cloud.mu.Lock()
	e.cloud.during = func(*corev1.Service) { close(entered); <-gate }
	e.cloud.mu.Unlock()
	old.Annotations["edited"] = "1"
	old, err := e.client.CoreV1().Services("default").Update(context.Background(), old, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-entered // the controller is inside the edit's ensure

	old.Finalizers = nil
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh := service("web", ptrTo(ourClass))
	fresh.UID = types.UID("uid-web-2")
	e.create(t, fresh)
	eventually(t, "the controller's cache holding the new Service", func() error {
		if s, err := e.ctrl.services.Services("default").Get("web"); err != nil || s.UID != fresh.UID {
			return fmt.Errorf("cached %v %w", s, err)
		}
		return nil
	})
	close(gate)

	eventually(t, "only the new Service's load balancer left", func() error {
		held := e.cloud.held()
		if len(held) != 1 || !held[fresh.UID] {
			return fmt.Errorf("load balancers held for %v, want only %s", held, fresh.UID)
		}
		if ingress(e.get(t, "web")) == "" {
			return errors.New("the new Service has no address")
		}
		return nil
	})
}

// TestEditDuringCreateIsEnsured: a port added while a new Service's load
// balancer is being created reaches the load balancer: the status write is
// guarded by the version ensured, and the sync the edit queued ensures it.
func TestEditDuringCreateIsEnsured(t *testing.T) {
	e := startEnv(t, envOptions{doc: cloudConfig, versioned: true})
	e.cloud.mu.Lock()
	e.cloud.during = func(*corev1.Service) {
		s, err := e.client.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
		if err == nil {
			s.Spec.Ports = append(s.Spec.Ports, utilt.Port(corev1.ProtocolTCP, 443, 30443))
			_, err = e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("editing during the ensure: %v", err)
		}
	}
	e.cloud.mu.Unlock()
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "the added port ensured", func() error {
		s := e.cloud.lastEnsured()
		if s == nil || len(s.Spec.Ports) != 2 {
			return fmt.Errorf("last ensured %v", s)
		}
		return nil
	})
	eventually(t, "addressed", addressed(e, t, "web"))
}

// TestReloadSyncRetriedAfterStatusWriteFails: a reload shrinking metal2's
// pool re-syncs web, whose address is replaced; the status write of that
// sync fails once (the API server briefly unavailable). The retry still
// publishes the new address. The reload's full-sync mark was taken by the
// failed sync and the retry, seeing the Service unchanged, only compared
// nodes: the status kept an address outside every pool.
func TestReloadSyncRetriedAfterStatusWriteFails(t *testing.T) {
	var fail atomic.Bool
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, reloadable: true,
		reactors: func(c *fake.Clientset) {
			c.PrependReactor("patch", "services", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() == "status" && strings.Contains(string(a.(clienttesting.PatchAction).GetPatch()), `"status"`) && fail.CompareAndSwap(true, false) {
					return true, nil, apierrors.NewServiceUnavailable("the API server is briefly unavailable")
				}
				return false, nil, nil
			})
		}})
	s := service("web", nil)
	s.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal2"}
	e.create(t, s)
	eventually(t, "web addressed", addressed(e, t, "web"))
	time.Sleep(200 * time.Millisecond) // the create's syncs settle: no condition to wait for
	fail.Store(true)
	e.reload(t, strings.Replace(metals(""), "198.51.100.0/28", "198.51.100.16/28", 1))
	eventually(t, "web's address in the shrunk pool", func() error {
		s := e.get(t, "web")
		if len(s.Status.LoadBalancer.Ingress) != 1 || !inPrefix(ingress(s), "198.51.100.16/28") {
			return fmt.Errorf("%s; failed once %v; events %v", state(s), !fail.Load(), e.events(t, "web"))
		}
		return nil
	})
}

// TestReloadMoveRetriedAfterRecordWriteFails: a reload moving
// defaultBackend from metal to metal2 re-syncs web; the write of its
// record and finalizer before the ensure fails once. The retry still moves
// it. The reload's full-sync mark was taken by the failed sync, and the
// retry, seeing the Service unchanged, only compared nodes: web stayed on
// metal.
func TestReloadMoveRetriedAfterRecordWriteFails(t *testing.T) {
	var fail atomic.Bool
	e := startEnv(t, envOptions{doc: metals("  defaultBackend: metal\n"), classless: true, versioned: true, reloadable: true,
		reactors: func(c *fake.Clientset) {
			c.PrependReactor("patch", "services", func(a clienttesting.Action) (bool, runtime.Object, error) {
				p := string(a.(clienttesting.PatchAction).GetPatch())
				if a.GetSubresource() == "status" && !strings.Contains(p, `"status"`) && strings.Contains(p, "load-balancer-backends") && fail.CompareAndSwap(true, false) {
					return true, nil, apierrors.NewServiceUnavailable("the API server is briefly unavailable")
				}
				return false, nil, nil
			})
		}})
	e.create(t, service("web", nil))
	eventually(t, "web addressed", addressed(e, t, "web"))
	time.Sleep(200 * time.Millisecond) // the create's syncs settle: no condition to wait for
	fail.Store(true)
	e.reload(t, metals("  defaultBackend: metal2\n"))
	eventually(t, "web moved to metal2", func() error {
		s := e.get(t, "web")
		if !strings.HasPrefix(ingress(s), "198.51.100.") {
			return fmt.Errorf("%s; failed once %v; events %v", state(s), !fail.Load(), e.events(t, "web"))
		}
		return nil
	})
}

package lbcontroller

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// TestReloadRerouteOneWriter (issue 40): under the default controller in
// classless mode, a reload moving defaultBackend from metal to metal2
// moves web (an address of metal2's pool, the record metal2), and no
// Service write comes from the router's re-sync (package
// router/process): the re-sync hands the re-route to the controller
// (SetServiceSync), whose full sync is the one writer, even without the
// controller's own Reloaded. Before, the re-sync's re-route wrote the new
// target in the record itself ("metal,metal2"), a second writer, and
// without the controller's Reloaded web stayed on metal's address.
func TestReloadRerouteOneWriter(t *testing.T) {
	var mu sync.Mutex
	var fromResync []string
	e := startEnv(t, envOptions{doc: metals("  defaultBackend: metal\n"), classless: true, versioned: true, reloadable: true,
		reactors: func(c *fake.Clientset) {
			for _, verb := range []string{"update", "patch"} {
				c.PrependReactor(verb, "services", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
					buf := make([]byte, 1<<20)
					stack := string(buf[:runtime.Stack(buf, false)])
					if strings.Contains(stack, "/pkg/router/process.") && !strings.Contains(stack, "/pkg/lbcontroller.") {
						mu.Lock()
						fromResync = append(fromResync, fmt.Sprintf("%s %s:\n%s", a.GetVerb(), a.GetSubresource(), stack))
						mu.Unlock()
					}
					return false, nil, nil
				})
			}
		}})
	e.create(t, service("web", nil))
	eventually(t, "web addressed by metal", func() error {
		if s := e.get(t, "web"); !strings.HasPrefix(ingress(s), "192.0.2.") {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	// The router's Apply alone, not the controller's Reloaded: the
	// re-route the router's re-sync queues must reach the controller by
	// itself (SetServiceSync), as a drain's end does.
	next, err := config.Parse([]byte(metals("  defaultBackend: metal2\n")), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.rl.Apply(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web moved to metal2", func() error {
		s := e.get(t, "web")
		if ingresses(s) == "" || !strings.HasPrefix(ingresses(s), "198.51.100.") || strings.Contains(ingresses(s), "192.0.2.") ||
			s.Annotations[string(annotation.LoadBalancerBackends)] != "metal2" {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(fromResync) > 0 {
		t.Errorf("%d Service writes by the router's re-sync beside the controller (want 0), the first:\n%s", len(fromResync), fromResync[0])
	}
}

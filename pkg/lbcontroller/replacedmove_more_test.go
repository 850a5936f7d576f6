package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// defaultRoutedDoc: metal and aws, classless Services routed to defaultBackend
// DEFAULT (replaced before formatting).
const defaultRoutedDoc = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  defaultBackend: DEFAULT
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools: [{name: lan, addresses: ["192.0.2.0/28"]}]
` + awsSection

// afterEnsure runs a hook (once) right after the router's
// EnsureLoadBalancer returned, before the controller sees its answer.
type afterEnsure struct {
	routerTargets
	mu    sync.Mutex
	after func(svc *corev1.Service, err error)
}

func (a *afterEnsure) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	st, err := a.routerTargets.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
	a.mu.Lock()
	f := a.after
	a.after = nil
	a.mu.Unlock()
	if f != nil {
		f(svc, err)
	}
	return st, err
}

func (a *afterEnsure) set(f func(*corev1.Service, error)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.after = f
}

// replaceByHand removes the Service's finalizers, deletes it and creates
// next under its name, without the test's goroutine (for hooks).
func replaceByHand(client interface {
	Get(context.Context, string, metav1.GetOptions) (*corev1.Service, error)
	Update(context.Context, *corev1.Service, metav1.UpdateOptions) (*corev1.Service, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
	Create(context.Context, *corev1.Service, metav1.CreateOptions) (*corev1.Service, error)
}, name string, next *corev1.Service) error {
	for range 20 {
		cur, err := client.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Finalizers = nil
		if _, err = client.Update(context.Background(), cur, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
			continue
		} else if err != nil {
			return err
		}
		if err := client.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		if next == nil {
			return nil
		}
		_, err = client.Create(context.Background(), next.DeepCopy(), metav1.CreateOptions{})
		return err
	}
	return errors.New("conflicts")
}

// TestReloadedDefaultMidEnsureThenReplaced: a classless Service
// routed by the default backend (metal) is edited; prepare runs under the
// old config (nothing to write: metal is recorded), then, before the
// router's ensure, a reload makes aws the default: the router adds aws to
// the record itself (addToRecord), makes the NLB and fails. Right after
// the failed call (before any retry could re-track), the Service is
// deleted by hand and re-created (routed to metal by annotation). The old
// one's NLB must be deleted: the kept copy names only metal (prepare
// wrote nothing), so this leans on the router's memory of its own write.
func TestReloadedDefaultMidEnsureThenReplaced(t *testing.T) {
	running, vpcID := runAWSFake(t)
	docOf := func(def string) string {
		return fmt.Sprintf(strings.Replace(defaultRoutedDoc, "DEFAULT", def, 1), running.URL, vpcID)
	}
	var hooked *afterEnsure
	e := startEnv(t, envOptions{doc: docOf("metal"), reloadable: true, versioned: true, classless: true,
		wrap: func(h *hookedCloud) Cloud { hooked = &afterEnsure{routerTargets: routerTargets{h}}; return hooked }})
	first := utilt.NewService("web")
	first.UID = "uid-web-1"
	e.create(t, first)
	waitFor(t, 30*time.Second, "web served by metal", synced(e, t, "web", 1))
	base := running.ResourceCount()

	next, err := config.Parse([]byte(docOf("aws")), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	prev := e.cfg
	reloaded := make(chan error, 1)
	e.cloud.mu.Lock()
	e.cloud.during = func(*corev1.Service) {
		ch, err := e.rl.Apply(context.Background(), next)
		if err == nil {
			e.ctrl.Reloaded(prev, next, ch)
		}
		reloaded <- err
	}
	e.cloud.mu.Unlock()
	again := utilt.NewService("web", utilt.WithAnnotation(string(annotation.LoadBalancerBackend), "metal"))
	again.UID = "uid-web-2"
	replaced := make(chan error, 1)
	hooked.set(func(_ *corev1.Service, ensureErr error) {
		if ensureErr == nil {
			replaced <- errors.New("the ensure under the new default succeeded; want it failing after the NLB")
			return
		}
		replaced <- replaceByHand(e.client.CoreV1().Services("default"), "web", again)
	})
	running.FailMutationsAfter(3)
	cur := e.get(t, "web")
	cur.Annotations = map[string]string{"test/edit": "1"}
	for k, v := range e.get(t, "web").Annotations {
		cur.Annotations[k] = v
	}
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, reloaded, "the reload inside the ensure"); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, replaced, "the replacement after the failed ensure"); err != nil {
		t.Fatal(err)
	}
	e.cfg = next
	running.ClearMutationFailures()
	waitFor(t, 30*time.Second, "the old Service's NLB deleted, the new one served by metal", func() error {
		if lbs := running.LoadBalancers(); len(lbs) != 0 {
			return fmt.Errorf("NLBs left: %v", nlbNames(lbs))
		}
		if n := running.ResourceCount(); n != base {
			return fmt.Errorf("%d AWS resources, want %d", n, base)
		}
		if s := e.get(t, "web"); s.UID != again.UID {
			return fmt.Errorf("web is %s", s.UID)
		}
		return synced(e, t, "web", 1)()
	})
}

// TestFailedMoveAtEachStepLeavesNothing: the commit's
// TestGoneMidMoveDeletesWhatTheMoveCreated with the move failing at each
// mutating step in aws (FailMutationsAfter(n), n = 0..7): after the
// Service is deleted by hand and re-created, nothing of the old one is
// left in aws (NLB, target groups, listeners, security groups). With n
// = 6 the move already succeeds (six mutating calls make it).
func TestFailedMoveAtEachStepLeavesNothing(t *testing.T) {
	for n := range 6 {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e, f, base := failedMove(t, n, nil)
			t.Logf("the failed move made %d AWS resources", f.ResourceCount()-base)
			replaceOnMetal(t, e)
			f.ClearMutationFailures()
			waitFor(t, 30*time.Second, "nothing of the old Service left in aws, the new one served by metal", noneLeftServed(e, t, f, base))
		})
	}
}

// TestReplacedAfterFailedMoveWaitsForTheMovesBackend (review of the
// fix, probe 63): a move metal -> aws whose every mutating call fails
// (nothing is made in aws), then aws refuses every request (a rotated
// key: 401) and the Service is deleted by hand and re-created on metal.
// The old Service's record names aws (written before the move's calls:
// aws may hold something), so its delete waits for aws, as upstream's
// service controller waits for the old Service's delete before serving
// the new one, with a Warning DeleteLoadBalancerFailed; once aws answers
// again, nothing of the old one is left and the new one is served.
func TestReplacedAfterFailedMoveWaitsForTheMovesBackend(t *testing.T) {
	e, f, base := failedMove(t, 0, nil)
	if got := f.ResourceCount(); got != base {
		t.Fatalf("the failed move made %d resources in aws; want none", got-base)
	}
	f.ClearMutationFailures()
	f.SetAccessKeys("AKIDSOMEONEELSE")
	replaceOnMetal(t, e)
	waitFor(t, 30*time.Second, "the old Service's delete waiting for aws", func() error {
		if strings.Contains(hasEvent(e.events(t, "web"), "DeleteLoadBalancerFailed"), "backend aws") {
			return nil
		}
		return fmt.Errorf("no DeleteLoadBalancerFailed naming aws; events %v", e.events(t, "web"))
	})
	f.SetAccessKeys()
	waitFor(t, 30*time.Second, "the re-created Service served by metal once aws answers", noneLeftServed(e, t, f, base))
}

// TestHandedOverMoveThenGone (review of the fix, probe 63): a Service
// served by metal is moved to aws with aws-load-balancer-type: external
// (the AWS Load Balancer Controller's): the router answers
// ImplementedElsewhere, and the controller forgets the Service. Deleted
// by hand then, its address in metal is still released (the bare-metal
// backend releases what a deleted Service held).
func TestHandedOverMoveThenGone(t *testing.T) {
	backendAnn := string(annotation.LoadBalancerBackend)
	first := utilt.NewService("web", utilt.WithAnnotation(backendAnn, "metal"))
	first.UID = "uid-web-1"
	e, _ := startAWS(t, envOptions{versioned: true, classless: true}, *first)
	waitFor(t, 30*time.Second, "web served by metal", synced(e, t, "web", 1))
	served := e.get(t, "web")

	moved := served.DeepCopy()
	moved.Annotations[backendAnn] = "aws"
	moved.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] = "external"
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the controller handed web over (forgot it)", func() error {
		if e.ctrl.known("default/web") {
			return errors.New("still known")
		}
		return nil
	})
	metalHolds := func() (bool, error) {
		_, exists, err := e.cloud.GetLoadBalancer(context.Background(), cluster, served)
		return exists, err
	}
	holds, err := metalHolds()
	t.Logf("after the hand-over: metal holds web's load balancer: %v (err %v); record %q", holds, err,
		e.get(t, "web").Annotations[string(annotation.LoadBalancerBackends)])
	e.deleteByHand(t, "web")
	time.Sleep(time.Second)
	if holds, err := metalHolds(); holds || err != nil {
		t.Errorf("web deleted by hand after its hand-over: metal still holds its load balancer (%v, err %v); events %v",
			holds, err, e.events(t, "web"))
	}
}

// TestGoneMidMoveDeletesWithTheCopyEnsured (review of the fix, probe
// 63): TestGoneMidMoveDeletesWhatTheMoveCreated with the Service carrying
// aws-load-balancer-type: external while metal serves it (harmless there:
// a left-over of a time the AWS Load Balancer Controller served it). The
// move's edit names aws and drops the type: our NLB is made, the sync
// fails, the Service is deleted by hand and re-created. Its delete must
// be made with the copy the move ensured, not the one metal served: the
// aws backend leaves a Service of type external to that controller.
func TestGoneMidMoveDeletesWithTheCopyEnsured(t *testing.T) {
	typeAnn := "service.beta.kubernetes.io/aws-load-balancer-type"
	first := utilt.NewService("web", utilt.WithAnnotation(string(annotation.LoadBalancerBackend), "metal"), utilt.WithAnnotation(typeAnn, "external"))
	e, f, base := failedMoveOf(t, first, 3, func(ann map[string]string) { delete(ann, typeAnn) })
	if n := len(f.LoadBalancers()); n != 1 {
		t.Fatalf("%d NLBs made by the failed move, want 1", n)
	}
	replaceOnMetal(t, e)
	f.ClearMutationFailures()
	waitFor(t, 15*time.Second, "the old Service's NLB deleted, the new one served by metal", noneLeftServed(e, t, f, base))
}

package testutil

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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestReview71SharedMapperAnswersAsItsOwn: a clientset sharing the one
// mapper (ShareRESTMapper) answers every write as a clientset building its
// own mapper per write does (fake.NewClientset as released): the same
// kinds stamped for known resources, given as plural, singular, in capitals
// or with the group only, and the same error for what the fake's scheme
// does not hold (a CRD-like resource, an unknown version, an empty
// resource). A developer's test that expects the fake to refuse an
// unregistered resource still sees it refused, with the same words.
//
// TestShareRESTMapper checks Services and ConfigMaps created through the
// typed client; this compares every other path of KindFor with the
// released fake's answer.
func TestReview71SharedMapperAnswersAsItsOwn(t *testing.T) {
	gvrs := []schema.GroupVersionResource{
		{Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "configmap"},
		{Version: "v1", Resource: "ConfigMaps"},
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: "apps", Resource: "deployments"},
		{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
		{Group: "example.com", Version: "v1", Resource: "widgets"},
		{Group: "apps", Version: "v9", Resource: "deployments"},
		{Version: "v1", Resource: ""},
		{Version: "v1", Resource: "nosuchthings"},
	}
	answer := func(c *fake.Clientset, gvr schema.GroupVersionResource, i int) string {
		obj := &unstructured.Unstructured{}
		obj.SetName(fmt.Sprintf("o%d", i))
		obj.SetNamespace("default")
		err := c.Tracker().Create(gvr, obj, "default")
		if err != nil {
			return "error: " + err.Error()
		}
		return "kind " + obj.GetObjectKind().GroupVersionKind().String()
	}
	own, shared := fake.NewClientset(), ShareRESTMapper(fake.NewClientset())
	for i, gvr := range gvrs {
		want, got := answer(own, gvr, i), answer(shared, gvr, i)
		if got != want {
			t.Errorf("%v: the shared mapper's clientset answers %q, the released fake %q", gvr, got, want)
		}
	}
	if got := answer(shared, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, 99); !strings.HasPrefix(got, "error: ") {
		t.Errorf("a resource outside the fake's scheme was accepted: %s", got)
	}
}

// TestReview71ApplyThroughSharedMapper: server-side apply through
// testutil.NewClientset (its update/patch reactors, the shared mapper)
// keeps each manager's fields: a second manager applying another value
// for a field the first owns is refused with a conflict, and with force
// takes it over; the object's managed fields name both managers' fields
// as the API server would.
func TestReview71ApplyThroughSharedMapper(t *testing.T) {
	ctx := context.Background()
	c := NewClientset()
	svcs := c.CoreV1().Services("default")
	a := corev1ac.Service("s", "default").WithLabels(map[string]string{"k": "a"}).
		WithSpec(corev1ac.ServiceSpec().WithType(corev1.ServiceTypeLoadBalancer))
	got, err := svcs.Apply(ctx, a, metav1.ApplyOptions{FieldManager: "a"})
	if err != nil {
		t.Fatalf("the first apply: %v", err)
	}
	if got.Kind != "Service" || got.Labels["k"] != "a" || len(got.ManagedFields) != 1 || got.ManagedFields[0].Manager != "a" {
		t.Errorf("after the first apply: kind %q labels %v managed fields %+v", got.Kind, got.Labels, got.ManagedFields)
	}
	b := corev1ac.Service("s", "default").WithLabels(map[string]string{"k": "b"})
	if _, err := svcs.Apply(ctx, b, metav1.ApplyOptions{FieldManager: "b"}); !apierrors.IsConflict(err) {
		t.Errorf("manager b applied a label manager a owns without force: %v, want a conflict", err)
	}
	got, err = svcs.Apply(ctx, b, metav1.ApplyOptions{FieldManager: "b", Force: true})
	if err != nil {
		t.Fatalf("the forced apply: %v", err)
	}
	managers := map[string]bool{}
	for _, m := range got.ManagedFields {
		managers[m.Manager] = true
	}
	if got.Labels["k"] != "b" || !managers["a"] || !managers["b"] || got.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Errorf("after the forced apply: labels %v, type %q, managers %v; want k=b, LoadBalancer, a and b", got.Labels, got.Spec.Type, managers)
	}
}

// TestReview71SharedMapperParallelClientsets: parallel tests each with
// their own testutil.NewClientset and informer write at once (create,
// update, patch, apply, status, delete) through the one shared mapper;
// under -race nothing races, and every write is stamped with its kind.
// The first clientset of the binary is made inside the goroutines, so
// that the mapper's one build (sync.Once) also happens under contention.
func TestReview71SharedMapperParallelClientsets(t *testing.T) {
	const clients, services = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, clients*services)
	start := make(chan struct{})
	for g := range clients {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", g)}})
			f := informers.NewSharedInformerFactory(c, 0)
			inf := f.Core().V1().Services().Informer()
			f.Start(ctx.Done())
			f.WaitForCacheSync(ctx.Done())
			svcs := c.CoreV1().Services("default")
			for i := range services {
				name := fmt.Sprintf("s%d", i)
				s, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(fmt.Sprintf("%d-%d", g, i))}}, metav1.CreateOptions{FieldManager: "t"})
				if err != nil {
					errs <- err
					continue
				}
				if s.Kind != "Service" {
					errs <- fmt.Errorf("created %s with kind %q", name, s.Kind)
				}
				s.Labels = map[string]string{"i": name}
				if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
					errs <- err
				}
				if _, err := svcs.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"a":"b"}}}`), metav1.PatchOptions{}); err != nil {
					errs <- err
				}
				if _, err := svcs.Apply(ctx, corev1ac.Service(name, "default").WithLabels(map[string]string{"x": "y"}), metav1.ApplyOptions{FieldManager: "m"}); err != nil {
					errs <- err
				}
				if err := svcs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					errs <- err
				}
			}
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				errs <- fmt.Errorf("client %d: the informer did not sync", g)
			}
			deadline := time.Now().Add(10 * time.Second)
			for len(inf.GetStore().List()) != 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := len(inf.GetStore().List()); n != 0 {
				errs <- fmt.Errorf("client %d: the informer still holds %d Services", g, n)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReview71ShareRESTMapperTwiceAndOnTheSimpleFake: ShareRESTMapper on a
// clientset it already shares is harmless; on fake.NewSimpleClientset's
// (a tracker without field management, and without the mapper field) it
// panics naming the helper, as its doc says, rather than doing nothing.
func TestReview71ShareRESTMapperTwiceAndOnTheSimpleFake(t *testing.T) {
	c := ShareRESTMapper(ShareRESTMapper(fake.NewClientset()))
	if s, err := c.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil || s.Kind != "ConfigMap" {
		t.Errorf("after ShareRESTMapper twice: %v, kind %q", err, s.Kind)
	}
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "testutil.ShareRESTMapper") {
			t.Errorf("ShareRESTMapper on NewSimpleClientset: recovered %v, want a panic naming the helper", r)
		}
	}()
	//nolint:staticcheck // SA1019: the deprecated fake is the case probed.
	ShareRESTMapper(fake.NewSimpleClientset())
}

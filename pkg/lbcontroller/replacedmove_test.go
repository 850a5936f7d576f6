package lbcontroller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestGoneMidMoveDeletesWhatTheMoveCreated (TestReloadTorture, CI of
// session 62: "d-1: served by metal, but 1 NLBs left"): a Service served
// by metal moves to aws; the sync writes aws into the record with its
// finalizer (prepare), creates the NLB and fails before it is done. The
// controller keeps the copy it last served (record: metal) until an ensure
// succeeds. The Service is then deleted by hand and re-created under its
// name: the old one's cleanup must reach every backend the record names
// as written, aws included, or its NLB is left for good (the router keeps
// no copy of a record the controller wrote).
func TestGoneMidMoveDeletesWhatTheMoveCreated(t *testing.T) {
	// The move: security group, its rule and the NLB are made; the next
	// mutating call (the target group) and every later one fail.
	e, f, base := failedMove(t, 3, nil)
	if n := len(f.LoadBalancers()); n != 1 {
		t.Fatalf("%d NLBs made by the failed move, want 1", n)
	}
	replaceOnMetal(t, e)
	f.ClearMutationFailures()
	waitFor(t, 30*time.Second, "the old Service's NLB deleted, the new one served by metal", noneLeftServed(e, t, f, base))
}

// failedMove serves web from metal, then moves it to aws (moved, when
// set, edits its annotations further) with every mutating call in aws
// after the first n failing, and waits for the move's sync to fail. It
// returns the AWS resources counted before the move.
func failedMove(t *testing.T, n int, moved func(map[string]string)) (*env, *awsfake.Running, int) {
	t.Helper()
	return failedMoveOf(t, utilt.NewService("web", utilt.WithAnnotation(string(annotation.LoadBalancerBackend), "metal")), n, moved)
}

func failedMoveOf(t *testing.T, first *corev1.Service, n int, moved func(map[string]string)) (*env, *awsfake.Running, int) {
	t.Helper()
	first.UID = "uid-web-1"
	e, f := startAWS(t, envOptions{versioned: true, classless: true}, *first)
	waitFor(t, 30*time.Second, "web served by metal", synced(e, t, "web", 1))
	base := f.ResourceCount()
	f.FailMutationsAfter(n)
	old := e.get(t, "web")
	old.Annotations[string(annotation.LoadBalancerBackend)] = "aws"
	if moved != nil {
		moved(old.Annotations)
	}
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the move's sync failed", func() error {
		if hasEvent(e.events(t, "web"), reasonSyncFailed) != "" {
			return nil
		}
		return fmt.Errorf("no failed sync yet; events %v", e.events(t, "web"))
	})
	return e, f, base
}

// replaceOnMetal deletes web by hand and creates it again (uid-web-2),
// routed to metal.
func replaceOnMetal(t *testing.T, e *env) *corev1.Service {
	t.Helper()
	e.deleteByHand(t, "web")
	again := utilt.NewService("web", utilt.WithAnnotation(string(annotation.LoadBalancerBackend), "metal"))
	again.UID = "uid-web-2"
	e.create(t, again)
	return again
}

// noneLeftServed holds once the AWS fake has base resources again (none
// of the old Service's) and the new web is served.
func noneLeftServed(e *env, t *testing.T, f *awsfake.Running, base int) func() error {
	return func() error {
		if got := f.ResourceCount(); got != base {
			return fmt.Errorf("%d AWS resources, want %d; NLBs left %v, target groups %d", got, base, nlbNames(f.LoadBalancers()), len(f.TargetGroups()))
		}
		if s := e.get(t, "web"); s.UID != "uid-web-2" {
			return fmt.Errorf("web is %s", s.UID)
		}
		return synced(e, t, "web", 1)()
	}
}

func nlbNames(lbs []awsfake.LoadBalancerView) []string {
	out := make([]string, 0, len(lbs))
	for _, lb := range lbs {
		out = append(out, lb.Name)
	}
	return out
}

// TestGoneDuringMoveDeletesWhatTheMoveCreated (TestReloadTorture, a local
// run of session 63): the Service is deleted by hand and re-created while
// its move's ensure is in flight. The ensure succeeds, its status cannot
// be written (the Service is gone), and the copy the controller kept
// names only the backend it moved from: the old Service's NLB must still
// be deleted.
func TestGoneDuringMoveDeletesWhatTheMoveCreated(t *testing.T) {
	backendAnn := string(annotation.LoadBalancerBackend)
	first := utilt.NewService("web", utilt.WithAnnotation(backendAnn, "metal"))
	first.UID = "uid-web-1"
	e, f := startAWS(t, envOptions{versioned: true, classless: true}, *first)
	waitFor(t, 30*time.Second, "web served by metal", synced(e, t, "web", 1))
	base := f.ResourceCount()

	again := utilt.NewService("web", utilt.WithAnnotation(backendAnn, "metal"))
	again.UID = "uid-web-2"
	replaced := make(chan error, 1)
	e.cloud.mu.Lock()
	e.cloud.during = func(*corev1.Service) {
		replaced <- replaceByHand(e.client.CoreV1().Services("default"), "web", again)
	}
	e.cloud.mu.Unlock()
	old := e.get(t, "web")
	old.Annotations[backendAnn] = "aws"
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-replaced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the move's ensure never ran")
	}
	waitFor(t, 30*time.Second, "the old Service's NLB deleted, the new one served by metal", noneLeftServed(e, t, f, base))
}

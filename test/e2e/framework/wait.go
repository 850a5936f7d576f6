package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PollInterval is how often the wait helpers check their condition.
const PollInterval = 250 * time.Millisecond

// Condition reports whether what a test waits for holds, with a short
// description of what it saw (kept for the failure message). An error ends
// the wait at once.
type Condition func(ctx context.Context) (done bool, observed string, err error)

// WaitFor polls cond every PollInterval until it holds, it fails, or
// timeout passes. The error says what was awaited and what was last seen.
func WaitFor(ctx context.Context, timeout time.Duration, what string, cond Condition) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	observed := "(nothing yet)"
	for {
		done, seen, err := cond(ctx)
		// A poll cut off by the deadline saw nothing: keep the one before,
		// which says what the test was waiting on.
		if seen != "" && ctx.Err() == nil {
			observed = seen
		}
		switch {
		case err != nil && ctx.Err() == nil && pastDeadline(err):
			// A client's rate limiter refuses a wait that would pass the
			// deadline before the deadline itself: what was last seen says
			// what the wait was stuck on (a CI run of session 62 lost it in
			// TestReloadTorture).
			return fmt.Errorf("gave up waiting for %s (up to %s): a poll's wait would pass the deadline (%w); last seen: %s", what, timeout, err, observed)
		case err != nil && ctx.Err() == nil:
			return fmt.Errorf("waiting for %s: %w", what, err)
		case done:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for %s; last seen: %s", timeout, what, observed)
		case <-tick.C:
		}
	}
}

// pastDeadline tells whether err is a wait refused because it would end
// after the context's deadline: context.DeadlineExceeded, or the
// "would exceed context deadline" of golang.org/x/time/rate that client-go's
// rate limiter returns without wrapping it.
func pastDeadline(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "would exceed context deadline")
}

// Eventually fails the test unless cond holds within timeout.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond Condition) {
	tb.Helper()
	if err := WaitFor(context.Background(), timeout, what, cond); err != nil {
		tb.Fatal(err)
	}
}

// Consistently fails the test if cond stops holding at any poll during
// the whole window. Use it only after showing, with an Eventually, that the
// controller under test has acted at least once; it is the check that
// something does not happen.
func Consistently(tb testing.TB, window time.Duration, what string, cond Condition) {
	tb.Helper()
	deadline := time.Now().Add(window)
	for {
		ok, seen, err := cond(context.Background())
		if err != nil || !ok {
			tb.Fatalf("%s stopped holding: %s (err: %v)", what, seen, err)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(PollInterval)
	}
}

// NodeCondition is a predicate on a Node, with a description of it.
type NodeCondition func(*corev1.Node) (bool, string)

// NodeMatches polls the node until pred holds. A missing node counts as
// not matching.
func NodeMatches(c kubernetes.Interface, name string, pred NodeCondition) Condition {
	return func(ctx context.Context) (bool, string, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "node " + name + " not found", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		ok, seen := pred(n)
		return ok, seen, nil
	}
}

// NodeGone holds once the node no longer exists.
func NodeGone(c kubernetes.Interface, name string) Condition {
	return func(ctx context.Context) (bool, string, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, fmt.Sprintf("node %s still exists (providerID %q)", name, n.Spec.ProviderID), nil
	}
}

// ServiceCondition is a predicate on a Service, with a description of it.
type ServiceCondition func(*corev1.Service) (bool, string)

// ServiceMatches polls the Service until pred holds.
func ServiceMatches(c kubernetes.Interface, namespace, name string, pred ServiceCondition) Condition {
	return func(ctx context.Context) (bool, string, error) {
		s, err := c.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "service not found", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		ok, seen := pred(s)
		return ok, seen, nil
	}
}

// ServiceGone holds once the Service no longer exists.
func ServiceGone(c kubernetes.Interface, namespace, name string) Condition {
	return func(ctx context.Context) (bool, string, error) {
		s, err := c.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, fmt.Sprintf("service still exists, finalizers %v, deletionTimestamp %v", s.Finalizers, s.DeletionTimestamp), nil
	}
}

// HasIngress holds once the Service has at least one ingress IP.
func HasIngress(s *corev1.Service) (bool, string) {
	ips := IngressIPs(s)
	return len(ips) > 0, fmt.Sprintf("ingress %v, finalizers %v", ips, s.Finalizers)
}

// EventSeen holds once an event of eventType (and reason, if not empty)
// about the object exists.
func EventSeen(c kubernetes.Interface, kind, namespace, name, eventType, reason string) Condition {
	return func(ctx context.Context) (bool, string, error) {
		evs, err := Events(ctx, c, kind, namespace, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return FindEvent(evs, eventType, reason) != nil, "events:\n" + DescribeEvents(evs), nil
	}
}

// EventWith holds once the object has an event of reason whose message
// contains every one of want.
func EventWith(c kubernetes.Interface, kind, namespace, name, reason string, want ...string) Condition {
	return func(ctx context.Context) (bool, string, error) {
		evs, err := Events(ctx, c, kind, namespace, name)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, ev := range evs {
			if ev.Reason != reason {
				continue
			}
			all := true
			for _, w := range want {
				all = all && strings.Contains(ev.Message, w)
			}
			if all {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("no %s event with %q; events:\n%s", reason, want, DescribeEvents(evs)), nil
	}
}

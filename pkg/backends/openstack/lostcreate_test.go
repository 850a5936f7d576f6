package openstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/testutil"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// errHeld is what lateTransport answers for a call it holds: the client
// gave up (a timeout), the request goes on later.
var errHeld = errors.New("held: the answer is lost, the request reaches OpenStack later")

// lateTransport holds the next mutating call: it answers errHeld at once
// and sends the request to OpenStack only at release, as the chaos
// judge's os-hang does (the CCM's client times out, Octavia gets the
// create 5 s later and makes the load balancer).
type lateTransport struct {
	next http.RoundTripper

	mu   sync.Mutex
	hold int
	held []*http.Request
}

func (l *lateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	hold := l.hold > 0 && r.Method != http.MethodGet && r.Method != http.MethodHead && !strings.HasSuffix(r.URL.Path, "/auth/tokens")
	if hold {
		l.hold--
	}
	l.mu.Unlock()
	if !hold {
		return l.next.RoundTrip(r)
	}
	body := []byte{}
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
	}
	late := r.Clone(context.WithoutCancel(r.Context()))
	late.Body = io.NopCloser(bytes.NewReader(body))
	l.mu.Lock()
	l.held = append(l.held, late)
	l.mu.Unlock()
	return nil, errHeld
}

// release sends the held calls to OpenStack and waits for their answers.
func (l *lateTransport) release(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	held := l.held
	l.held = nil
	l.mu.Unlock()
	for _, r := range held {
		resp, err := l.next.RoundTrip(r)
		if err != nil {
			t.Fatalf("the held %s %s: %v", r.Method, r.URL.Path, err)
		}
		_ = resp.Body.Close()
		t.Logf("the held %s %s reached OpenStack: %s", r.Method, r.URL.Path, resp.Status)
	}
}

// newLateConformance is a real-Octavia backend whose mutating calls can be
// held (lateTransport, under the fault transport), with a Service whose
// load balancers the test deletes at its end, whatever happened.
func newLateConformance(t *testing.T) (*conformance, *lateTransport, *corev1.Service) {
	t.Helper()
	c := newConformance(t, true)
	late := &lateTransport{next: c.fault.next}
	c.fault.next = late
	svc := newService("late-" + randomID(t))
	t.Cleanup(func() {
		ctx := context.Background()
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
			found, err := c.cloud.lb.find(ctx, c.direct, svc)
			if err != nil || len(found) == 0 {
				return
			}
			for _, lb := range found {
				_ = loadbalancers.Delete(ctx, c.direct.loadBalancer, lb.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr()
			}
		}
	})
	return c, late, svc
}

// TestLostCreateThenDelete: the create's answer is lost and the request
// reaches Octavia only after the Service left the backend (moved, deleted,
// re-created under its name: chaos seeds 417057952 and 586911786). The
// delete must not report nothing left while the create may still land, and
// once it landed it must delete that load balancer: none is left.
func TestLostCreateThenDelete(t *testing.T) {
	t.Parallel()
	if !haveRealOctavia() {
		realOctavia(t) // skips, or fails under CI
	}
	c, late, svc := newLateConformance(t)
	ctx := context.Background()
	nodes := []*corev1.Node{newNode("vm-a", withInternalIP("10.0.0.11"))}
	late.mu.Lock()
	late.hold = 1
	late.mu.Unlock()
	if _, err := c.cloud.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes); !errors.Is(err, errHeld) {
		t.Fatalf("EnsureLoadBalancer with its create held: %v, want the held call's error", err)
	}
	if _, exists, err := c.cloud.lb.GetLoadBalancer(ctx, "kubernetes", svc.DeepCopy()); err != nil || !exists {
		t.Errorf("GetLoadBalancer while the lost create may land: exists=%v, %v; want exists (upstream would skip the delete)", exists, err)
	}
	if err := c.cloud.lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc.DeepCopy()); err == nil {
		t.Errorf("EnsureLoadBalancerDeleted reported nothing left while the lost create may still land")
	} else {
		t.Logf("the delete before the create landed: %v", err)
	}
	late.release(t)
	calls := 0
	for deadline, pause := time.Now().Add(3*time.Minute), newPauses(c.cloud.lb.retryDelay); ; time.Sleep(pause()) {
		calls++
		err := c.cloud.lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc.DeepCopy())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delete did not finish: %v", err)
		}
	}
	if lbs, parts := c.parts(t, svc); lbs != 0 {
		t.Fatalf("after the delete (%d calls after the create landed): %d load balancers (%d parts) left, want none: the lost create leaked", calls, lbs, parts)
	}
}

// TestLostCreateNoSecond: while a create whose answer was lost may still
// land, Ensure makes no second one; once it landed, Ensure converges it:
// exactly one load balancer.
func TestLostCreateNoSecond(t *testing.T) {
	t.Parallel()
	if !haveRealOctavia() {
		realOctavia(t) // skips, or fails under CI
	}
	c, late, svc := newLateConformance(t)
	ctx := context.Background()
	nodes := []*corev1.Node{newNode("vm-a", withInternalIP("10.0.0.11"))}
	late.mu.Lock()
	late.hold = 1
	late.mu.Unlock()
	if _, err := c.cloud.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes); !errors.Is(err, errHeld) {
		t.Fatalf("EnsureLoadBalancer with its create held: %v, want the held call's error", err)
	}
	before := c.fault.Mutations()
	if _, err := c.cloud.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes); err == nil {
		t.Fatal("EnsureLoadBalancer succeeded with nothing in Octavia")
	}
	if n := c.fault.Mutations() - before; n != 0 {
		t.Errorf("Ensure made %d mutating calls while the lost create may still land, want none (a second load balancer)", n)
	}
	late.release(t)
	for deadline, pause := time.Now().Add(4*time.Minute), newPauses(c.cloud.lb.retryDelay); ; time.Sleep(pause()) {
		_, err := c.cloud.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the load balancer did not converge: %v", err)
		}
	}
	found, err := c.cloud.lb.find(ctx, c.direct, svc)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("%d load balancers for the Service after a lost create, want 1", len(found))
	}
}

// TestAnswerLost: which failed creates may have been made all the same.
func TestAnswerLost(t *testing.T) {
	t.Parallel()
	code := func(n int) error {
		return fmt.Errorf("creating load balancer: %w", gophercloud.ErrUnexpectedResponseCode{Actual: n})
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"timeout", &url.Error{Op: "Post", URL: "http://octavia", Err: context.DeadlineExceeded}, true},
		{"held", &url.Error{Op: "Post", URL: "http://octavia", Err: errHeld}, true},
		{"connection refused", &url.Error{Op: "Post", URL: "http://octavia", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}, false},
		{"reset after sending", &url.Error{Op: "Post", URL: "http://octavia", Err: &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}}, true},
		{"500", code(http.StatusInternalServerError), true},
		{"502", code(http.StatusBadGateway), true},
		{"504", code(http.StatusGatewayTimeout), true},
		{"503", code(http.StatusServiceUnavailable), false},
		{"409", code(http.StatusConflict), false},
		{"403 quota", code(http.StatusForbidden), false},
		{"refused by the mutation gate", &url.Error{Op: "Post", URL: "http://octavia", Err: fmt.Errorf("backend %q, load-balancer API: %w: %w", "os", cloudapi.ErrMutationRefused, errors.New("deposed"))}, false},
	} {
		if got := answerLost(tc.err); got != tc.want {
			t.Errorf("%s: answerLost = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMutationGateRealStack: against the real Octavia, with the mutation
// gate closed (a replica that lost its leader-election lease), Ensure is
// refused with cloudapi.ErrMutationRefused and sends nothing: Octavia has
// no load balancer for the Service, and the refused create is not taken
// for a create whose answer was lost (which would have GetLoadBalancer
// report one and the delete wait for it to land). Once the gate opens,
// Ensure converges; closed again, UpdateLoadBalancer's member change is
// refused too. In a process of its own (inOwnProcess), beside the other
// tests: the gate is the process's, and it counts the writes of every
// backend named "os" (newConformance's).
func TestMutationGateRealStack(t *testing.T) {
	if !haveRealOctavia() {
		realOctavia(t) // skips, or fails under CI
	}
	if inOwnProcess(t) {
		return
	}
	c, _, svc := newLateConformance(t)
	ctx := context.Background()
	nodes := []*corev1.Node{newNode("vm-a", withInternalIP("10.0.0.11"))}
	var closed atomic.Bool
	closed.Store(true)
	deposed := errors.New("deposed")
	old := cloudapi.SetMutationGate(func(context.Context) error {
		if closed.Load() {
			return deposed
		}
		return nil
	})
	t.Cleanup(func() { cloudapi.SetMutationGate(old) })
	writes := func() float64 {
		v, err := testutil.GetCounterMetricValue(apiRequests.WithLabelValues("os", "load-balancer", "write"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	writesBefore := writes()
	_, err := c.cloud.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes)
	if !errors.Is(err, cloudapi.ErrMutationRefused) {
		t.Fatalf("EnsureLoadBalancer with the gate closed: %v, want ErrMutationRefused", err)
	}
	t.Logf("refused: %v", err)
	if n := writes() - writesBefore; n != 0 {
		t.Errorf("openstack_api_requests_total{kind=write} counted %v refused writes, want 0: nothing was sent", n)
	}
	if found, err := c.cloud.lb.find(ctx, c.direct, svc); err != nil || len(found) != 0 {
		t.Fatalf("Octavia holds %d load balancers for the Service after a refused Ensure (%v), want none", len(found), err)
	}
	if until := c.cloud.lb.pendingCreate(svc); !until.IsZero() {
		t.Errorf("the refused create was taken for a lost one (may land until %s): it sent nothing", until.Format(time.RFC3339))
	}
	if _, exists, err := c.cloud.lb.GetLoadBalancer(ctx, "kubernetes", svc.DeepCopy()); err != nil || exists {
		t.Errorf("GetLoadBalancer after a refused create: exists=%v, %v; want none", exists, err)
	}
	if err := c.cloud.lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc.DeepCopy()); err != nil {
		t.Errorf("EnsureLoadBalancerDeleted after a refused create: %v, want nothing to delete", err)
	}
	closed.Store(false)
	for deadline, pause := time.Now().Add(3*time.Minute), newPauses(c.cloud.lb.retryDelay); ; time.Sleep(pause()) {
		_, err := c.cloud.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with the gate open, the load balancer did not converge: %v", err)
		}
	}
	// The members-only update goes through the same gate.
	closed.Store(true)
	writesBefore = writes()
	more := []*corev1.Node{nodes[0], newNode("vm-b", withInternalIP("10.0.0.12"))}
	if err := c.cloud.lb.UpdateLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), more); !errors.Is(err, cloudapi.ErrMutationRefused) {
		t.Errorf("UpdateLoadBalancer with a new node and the gate closed: %v, want ErrMutationRefused", err)
	}
	if n := writes() - writesBefore; n != 0 {
		t.Errorf("the refused update counted %v writes, want 0", n)
	}
	closed.Store(false)
}

// TestLostCreateAcrossTakeover: the leader's create is held on its way,
// the leader is deposed, and the replica that takes over (which never
// saw the create, so has nothing in lostCreates) deletes the Service's
// load balancer: the delete must not report nothing left while a create
// the previous leader sent may still land, and deletes it once it landed
// (chaos seed 556087352). In a process of its own (inOwnProcess), beside
// the other tests: the takeover clock is the process's, and the other
// tests' deletes would wait on it.
func TestLostCreateAcrossTakeover(t *testing.T) {
	if !haveRealOctavia() {
		realOctavia(t) // skips, or fails under CI
	}
	if inOwnProcess(t) {
		return
	}
	c, late, svc := newLateConformance(t)
	c.cloud.lb.lostWindow = 45 * time.Second
	ctx := context.Background()
	nodes := []*corev1.Node{newNode("vm-a", withInternalIP("10.0.0.11"))}
	late.mu.Lock()
	late.hold = 1
	late.mu.Unlock()
	if _, err := c.cloud.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes); !errors.Is(err, errHeld) {
		t.Fatalf("EnsureLoadBalancer with its create held: %v, want the held call's error", err)
	}
	// The new leader is another process: it knows nothing of the create.
	lostCreates.Delete(c.cloud.lb.lostKey(svc))
	tookOver := time.Now()
	old := cloudapi.SetTakeover(func() time.Time { return tookOver })
	t.Cleanup(func() { cloudapi.SetTakeover(old) })

	if _, exists, err := c.cloud.lb.GetLoadBalancer(ctx, "kubernetes", svc.DeepCopy()); err != nil || !exists {
		t.Errorf("GetLoadBalancer right after a takeover, nothing found: exists=%v, %v; want exists (the previous leader's create may land)", exists, err)
	}
	if err := c.cloud.lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc.DeepCopy()); err == nil {
		t.Fatal("EnsureLoadBalancerDeleted right after a takeover reported nothing left while the previous leader's create may still land")
	} else if !strings.Contains(err.Error(), "by the leader before a takeover") {
		t.Errorf("the delete's retry does not say why: %v", err)
	}
	late.release(t)
	for deadline, pause := time.Now().Add(3*time.Minute), newPauses(c.cloud.lb.retryDelay); ; time.Sleep(pause()) {
		err := c.cloud.lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc.DeepCopy())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delete did not finish: %v", err)
		}
	}
	if lbs, parts := c.parts(t, svc); lbs != 0 {
		t.Fatalf("after the delete: %d load balancers (%d parts) left, want none: the previous leader's create leaked", lbs, parts)
	}
}

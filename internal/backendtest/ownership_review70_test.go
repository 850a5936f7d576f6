package backendtest

// Session 70's review probes of repairPass's retried BeginRepairPass
// (commit 2c1e4d7's parent 088e4a4): a backend whose bulk read fails once
// gets its pass on the second try, its snapshot reaches Ensure and is
// released once; a backend whose bulk read always fails still fails the
// test, after exactly three tries.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

type review70PassKey struct{}

// review70Cloud is a cloudprovider.Interface and LoadBalancer whose
// BeginRepairPass fails the first failures calls (failures < 0: always).
type review70Cloud struct {
	cloudprovider.Interface

	failures int
	begins   atomic.Int32
	ends     atomic.Int32
	// endsAtEnsure is ends when Ensure ran; passSeen whether Ensure's ctx
	// carried the pass.
	endsAtEnsure atomic.Int32
	passSeen     atomic.Bool
	ensures      atomic.Int32
}

func (c *review70Cloud) BeginRepairPass(ctx context.Context, _ string) (context.Context, func(), error) {
	n := int(c.begins.Add(1))
	if c.failures < 0 || n <= c.failures {
		// A failed try's end must not matter (no snapshot): count a call.
		return ctx, func() { c.ends.Add(100) }, errors.New("500 'NoneType' object has no attribute 'to_dict'")
	}
	return context.WithValue(ctx, review70PassKey{}, n), func() { c.ends.Add(1) }, nil
}

// review70LB is the cloud's load balancer (a separate type: the
// Interface's LoadBalancer method and the LoadBalancer interface clash).
type review70LB struct {
	cloudprovider.LoadBalancer
	c *review70Cloud
}

func (l review70LB) EnsureLoadBalancer(ctx context.Context, cluster string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	return l.c.ensure(ctx, cluster, svc, nodes)
}

func (c *review70Cloud) ensure(ctx context.Context, _ string, _ *corev1.Service, _ []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	c.ensures.Add(1)
	c.endsAtEnsure.Store(c.ends.Load())
	c.passSeen.Store(ctx.Value(review70PassKey{}) != nil)
	return &corev1.LoadBalancerStatus{}, nil
}

func review70Suite(t *testing.T, c *review70Cloud) *suite {
	return &suite{f: &Fixture{Cloud: c, Provision: time.Second}, ctx: t.Context(), lb: review70LB{c: c}}
}

// TestReview70RepairPassRetriesOnce: one failed bulk read, then a pass:
// two tries, Ensure under the pass's ctx, the pass's end called once after
// Ensure, the failed try's end never.
func TestReview70RepairPassRetriesOnce(t *testing.T) {
	c := &review70Cloud{failures: 1}
	s := review70Suite(t, c)
	start := time.Now()
	s.repairPass(t, &corev1.Service{}, nil)
	if got := c.begins.Load(); got != 2 {
		t.Errorf("BeginRepairPass called %d times, want 2", got)
	}
	if !c.passSeen.Load() || c.ensures.Load() != 1 {
		t.Errorf("Ensure ran %d times, under the pass: %v; want once under it", c.ensures.Load(), c.passSeen.Load())
	}
	if c.endsAtEnsure.Load() != 0 || c.ends.Load() != 1 {
		t.Errorf("ends: %d before Ensure, %d after (100 per failed try's end); want 0 and 1", c.endsAtEnsure.Load(), c.ends.Load())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("one retry took %v", d)
	}
}

// TestReview70RepairPassAlwaysFailing: a bulk read that never succeeds
// still fails the test (run in a child process), after three tries, and
// Ensure is not run.
func TestReview70RepairPassAlwaysFailing(t *testing.T) {
	if os.Getenv("REVIEW70_CHILD") == "always" {
		c := &review70Cloud{failures: -1}
		t.Cleanup(func() {
			t.Logf("REVIEW70 begins=%d ensures=%d ends=%d", c.begins.Load(), c.ensures.Load(), c.ends.Load())
		})
		review70Suite(t, c).repairPass(t, &corev1.Service{}, nil)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReview70RepairPassAlwaysFailing$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "REVIEW70_CHILD=always")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the child passed or did not run (%v): a backend whose bulk read always fails passes the suite\n%s", err, out)
	}
	o := string(out)
	if !strings.Contains(o, "BeginRepairPass, 3 tries") {
		t.Errorf("the child failed, but not on the third try:\n%s", o)
	}
	if !strings.Contains(o, "REVIEW70 begins=3 ensures=0 ends=0") {
		t.Errorf("want 3 tries, no Ensure, no failed try's end called:\n%s", o)
	}
}

package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/component-base/metrics/testutil"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// TestBackendHealth: a backend whose calls fail to reach its cloud three
// times in a row fails the health check, naming it and its last error, and
// its up gauge drops to 0; answers a user can act on, and calls the caller
// gave up on, change nothing; the first answer makes it healthy again.
func TestBackendHealth(t *testing.T) {
	name := fmt.Sprintf("health-%s", t.Name())
	broken, fine := instanceCloud(true, nil), instanceCloud(true, nil)
	r := mustRouter(t, testConfig(), awsB(name, broken), Backend{Name: name + "-ok", Type: "vsphere", Scheme: "vsphere", Cloud: fine})
	node := newNode("n", withProviderID("aws:///us-east-1a/i-1"))
	check := r.BackendHealthChecker()
	ask := func(ctx context.Context, err error) {
		broken.ErrByProviderID = err
		_, _ = r.InstanceExists(ctx, node)
	}
	up := func() float64 {
		v, err := testutil.GetGaugeMetricValue(backend.BackendUp.WithLabelValues(name))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	outage := errors.New("dial tcp: connection refused")
	ask(context.Background(), outage)
	ask(context.Background(), outage)
	if err := check.Check(nil); err != nil || up() != 1 {
		t.Fatalf("after 2 failures: check %v, up %v; want healthy", err, up())
	}
	for _, err := range []error{backends.NewUserError("BadThing", errors.New("fix it"))} {
		ask(context.Background(), err)
	}
	ask(context.Background(), outage)
	ask(context.Background(), outage)
	if err := check.Check(nil); err != nil {
		t.Fatalf("a user error between failures must reset the count: %v", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	ask(cancelled, context.Canceled)
	ask(context.Background(), outage)
	err := check.Check(nil)
	if err == nil || !strings.Contains(err.Error(), "backend "+name+": 3 calls in a row failed") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("after 3 failures (a cancelled call between them): check = %v, want the backend and its last error named", err)
	}
	if strings.Contains(err.Error(), name+"-ok") || up() != 0 {
		t.Errorf("check = %v, up = %v; want only %s, down", err, up(), name)
	}
	ask(context.Background(), nil)
	if err := check.Check(nil); err != nil || up() != 1 {
		t.Errorf("after an answer: check %v, up %v; want healthy", err, up())
	}
}

package openstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"
	"k8s.io/component-base/metrics/legacyregistry"
	metricstestutil "k8s.io/component-base/metrics/testutil"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// The shared builders of internal/testutil.
type serviceTweak = testutil.ServiceTweak

var (
	newService       = testutil.NewService
	withLocalTraffic = testutil.WithLocalTraffic
	withSourceRanges = testutil.WithSourceRanges
	newNode          = testutil.NewNode
	withInternalIP   = testutil.WithInternalIP
	withProviderID   = testutil.WithProviderID
	withLabel        = testutil.WithLabel
)

// withAnnotation sets annotation n.
func withAnnotation(n annotation.Name, v string) serviceTweak {
	return testutil.WithAnnotation(string(n), v)
}

// annotations turns annotation names and values into metadata.annotations.
func annotations(m map[annotation.Name]string) map[string]string {
	out := make(map[string]string, len(m))
	for n, v := range m {
		out[string(n)] = v
	}
	return out
}

// withPort adds a port (named p<port>) to the Service's.
func withPort(proto corev1.Protocol, port, nodePort int32) serviceTweak {
	return func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", port), Protocol: proto, Port: port, NodePort: nodePort})
	}
}

func randomID(t testing.TB) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// realOctavia returns settings for the stack hack/openstack/up.sh starts.
// Without its environment the test is skipped, or fails when CI is set.
func realOctavia(t testing.TB) *Settings {
	t.Helper()
	if os.Getenv("OS_AUTH_URL") == "" || os.Getenv("OCTAVIA_E2E") == "" || os.Getenv("OS_PASSWORD_FILE") == "" {
		testutil.Unavailable(t, `no real Keystone + Octavia: run eval "$(hack/openstack/up.sh)" first (sets OS_AUTH_URL, OS_PASSWORD_FILE, OCTAVIA_E2E)`)
	}
	s := &Settings{
		Auth: Auth{
			AuthURL: os.Getenv("OS_AUTH_URL"), Username: os.Getenv("OS_USERNAME"), Password: config.SecretRef{File: os.Getenv("OS_PASSWORD_FILE")},
			ProjectName: os.Getenv("OS_PROJECT_NAME"),
		},
		Region:       os.Getenv("OS_REGION_NAME"),
		LoadBalancer: LoadBalancerSettings{VIPSubnetID: VIPSubnetForTests},
	}
	s.setDefaults("")
	if errs := s.validate(nil, ""); len(errs) > 0 {
		t.Fatalf("settings from the environment: %v", errs.ToAggregate())
	}
	return s
}

// newRealCloud builds a backend against the real stack, as the router
// would, with a fresh cluster ID so tests never see each other's objects.
// Its backend name is its own too ("os-" and the cluster ID): the API call
// counters (apiCalls) are per backend name, and tests running in parallel
// must not count each other's calls.
func newRealCloud(t testing.TB, s *Settings, clusterID string) *Cloud {
	t.Helper()
	c, err := New(context.Background(), backends.Options{Name: "os-" + clusterID, ClusterID: clusterID, Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	cl := c.(*Cloud)
	cl.lb.retryDelay = 300 * time.Millisecond
	return cl
}

// isRetry reports whether err asks the caller to come back later.
func isRetry(err error) bool {
	var re *api.RetryError
	return errors.As(err, &re)
}

// ensureConverged calls EnsureLoadBalancer until it stops asking to retry,
// as the service controller would, and returns the status and the number of
// calls it took.
func ensureConverged(t testing.TB, lb *LoadBalancer, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, int) {
	t.Helper()
	deadline := time.Now().Add(180 * time.Second)
	pause := newPauses(lb.retryDelay)
	for calls := 1; ; calls++ {
		st, err := lb.EnsureLoadBalancer(context.Background(), "kubernetes", svc, nodes)
		if err == nil {
			return st, calls
		}
		if !isRetry(err) && !sqliteLocked(err) {
			t.Fatalf("EnsureLoadBalancer: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("EnsureLoadBalancer still asks to retry after %d calls: %v", calls, err)
		}
		time.Sleep(pause())
	}
}

// newPauses returns the pauses of a converge loop: first, then half again
// as long each time, to at most eight times first or 2 s, whichever is
// less. Octavia under load takes seconds to apply a change, and a call
// every 300 ms from four tests side by side made a third of the Octavia
// API's requests (and of its CPU) in the unit stage asking again.
func newPauses(first time.Duration) func() time.Duration {
	next, limit := first, min(8*first, 2*time.Second)
	return func() time.Duration {
		d := next
		next = min(next*3/2, limit)
		return d
	}
}

// eventuallyOn polls cond every half second until it returns nil, failing
// the test with what and cond's last error once timeout has passed: a wait
// on what the real stack does. Octavia applies a change in a second or
// more; testutil.Eventually's 50 ms polls, from every test running in
// parallel, kept its two API workers so busy that requests timed out.
func eventuallyOn(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	testutil.EventuallyEvery(t, timeout, 500*time.Millisecond, what, cond)
}

// deleteConverged calls EnsureLoadBalancerDeleted until it returns nil.
func deleteConverged(t testing.TB, lb *LoadBalancer, svc *corev1.Service) {
	t.Helper()
	deadline := time.Now().Add(180 * time.Second)
	pause := newPauses(lb.retryDelay)
	for {
		err := lb.EnsureLoadBalancerDeleted(context.Background(), "kubernetes", svc)
		if err == nil {
			return
		}
		if !isRetry(err) && !sqliteLocked(err) {
			t.Fatalf("EnsureLoadBalancerDeleted: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("EnsureLoadBalancerDeleted still asks to retry: %v", err)
		}
		time.Sleep(pause())
	}
}

// RealOctavia is realOctavia for the package's external tests.
func RealOctavia(t testing.TB) *Settings { return realOctavia(t) }

// VIPSubnetForTests is the VIP subnet the tests' load balancers use (the
// noop network driver accepts any).
const VIPSubnetForTests = "6f1e4f39-9c6a-4d55-8a25-4a4c8c3c2b11"

// sqliteLocked reports sqlite write contention: Octavia on sqlite (the test
// stack before it moved to MariaDB, #23) answers 500 "database is locked"
// when its API and worker (or two test processes) write at once. The
// helpers retry it, as the service controller retries any error, so the
// tests still run against a stack an older checkout started.
func sqliteLocked(err error) bool {
	return gophercloud.ResponseCodeIs(err, http.StatusInternalServerError) && strings.Contains(err.Error(), "database is locked")
}

// apiCalls reads multicloud_ccm_openstack_api_requests_total for c's
// backend: its reads and writes, summed over the services.
func apiCalls(t testing.TB, c *Cloud) (reads, writes float64) {
	t.Helper()
	return apiCallsMatching(t, map[string]string{"backend": c.name})
}

// apiCallsMatching sums multicloud_ccm_openstack_api_requests_total's
// series whose labels include want, by kind.
func apiCallsMatching(t testing.TB, want map[string]string) (reads, writes float64) {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "multicloud_ccm_openstack_api_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !metricstestutil.LabelsMatch(m, want) {
				continue
			}
			if metricstestutil.LabelsMatch(m, map[string]string{"kind": "read"}) {
				reads += m.GetCounter().GetValue()
			} else {
				writes += m.GetCounter().GetValue()
			}
		}
	}
	return reads, writes
}

// octaviaSQL runs sql in the test stack's Octavia database (MariaDB, as
// hack/openstack/lib.sh starts it: its client settings are beside the
// admin password) and returns the client's tab-separated rows, without
// column names. It writes there what a failed amphora or Octavia's Neutron
// network driver would have left.
func octaviaSQL(t testing.TB, sql string) string {
	t.Helper()
	cnf := filepath.Join(filepath.Dir(os.Getenv("OS_PASSWORD_FILE")), "mariadb-client.cnf")
	cmd := exec.Command("mariadb", "--defaults-file="+cnf, "-N", "-B", "octavia")
	cmd.Stdin = strings.NewReader(sql)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("mariadb octavia: %v: %s\n%s", err, stderr.String(), sql)
	}
	return string(out)
}

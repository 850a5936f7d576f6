package cloudapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// throttlingServer answers 429 (or 503 with Retry-After when retryAfter503)
// to the first n requests, then 200, and records each body it got.
type throttlingServer struct {
	mu     sync.Mutex
	n      int
	status int
	header string
	bodies []string
}

func (s *throttlingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodies = append(s.bodies, string(b))
	if s.n > 0 {
		s.n--
		if s.header != "" {
			w.Header().Set("Retry-After", s.header)
		}
		w.WriteHeader(s.status)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

func newTransport(url string, waits *[]time.Duration) *Transport {
	tr := &Transport{
		Budget: NewBudget("os-1", nil, map[string]RateLimit{"load-balancer": {QPS: 1000, Bucket: 100, QPSWrite: 1000, BucketWrite: 100}}),
		sleep: func(_ context.Context, d time.Duration) error {
			*waits = append(*waits, d)
			return nil
		},
	}
	tr.SetEndpoints([]Endpoint{{Prefix: url + "/v2/", API: "load-balancer"}})
	return tr
}

// TestTransportRetriesThrottling: a 429 is retried after the Retry-After
// the server asked for, the POST body sent again whole; a 503 with
// Retry-After too; a plain 503 is not (the request may have been half
// done); a body that cannot be replayed is not retried; every attempt is
// counted, the throttled ones apart.
func TestTransportRetriesThrottling(t *testing.T) {
	srv := &throttlingServer{n: 2, status: http.StatusTooManyRequests, header: "3"}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	var waits []time.Duration
	c := &http.Client{Transport: newTransport(hs.URL, &waits)}
	throttledPOST := map[string]string{"backend": "os-1", "api": "load-balancer", "action": "POST", "outcome": "throttled"}
	before := testutil.CounterSum(t, "multicloud_ccm_cloud_api_calls_total", throttledPOST)

	resp, err := c.Post(hs.URL+"/v2/lbaas/loadbalancers", "application/json", strings.NewReader(`{"loadbalancer":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(srv.bodies) != 3 || srv.bodies[2] != `{"loadbalancer":{}}` {
		t.Fatalf("status %d after %d attempts (bodies %q), want 200 after 3 with the body each time", resp.StatusCode, len(srv.bodies), srv.bodies)
	}
	if len(waits) != 2 || waits[0] != 3*time.Second {
		t.Errorf("waits = %v, want two of Retry-After's 3s", waits)
	}
	if got := testutil.CounterSum(t, "multicloud_ccm_cloud_api_calls_total", throttledPOST) - before; got != 2 {
		t.Errorf("calls_total{throttled} grew by %v, want 2", got)
	}

	srv.n, srv.status, srv.header, srv.bodies, waits = 1, http.StatusServiceUnavailable, "", nil, nil
	resp, err = c.Get(hs.URL + "/v2/lbaas/loadbalancers")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || len(srv.bodies) != 1 {
		t.Errorf("a plain 503: status %d after %d attempts, want 503 after 1", resp.StatusCode, len(srv.bodies))
	}

	srv.n, srv.header, srv.bodies = 1, "1", nil
	resp, err = c.Get(hs.URL + "/v2/lbaas/loadbalancers")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(srv.bodies) != 2 {
		t.Errorf("503 with Retry-After: status %d after %d attempts, want 200 after 2", resp.StatusCode, len(srv.bodies))
	}

	// A body without GetBody cannot be sent twice.
	srv.n, srv.status, srv.bodies = 1, http.StatusTooManyRequests, nil
	req, _ := http.NewRequest(http.MethodPut, hs.URL+"/v2/lbaas/pools/p", io.NopCloser(strings.NewReader("x")))
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || len(srv.bodies) != 1 {
		t.Errorf("a body without GetBody: status %d after %d attempts, want 429 after 1", resp.StatusCode, len(srv.bodies))
	}

	// Outside every endpoint (Keystone): no budget, not counted.
	before = testutil.CounterSum(t, "multicloud_ccm_cloud_api_calls_total", map[string]string{"backend": "os-1"})
	resp, err = c.Get(hs.URL + "/identity/v3")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if after := testutil.CounterSum(t, "multicloud_ccm_cloud_api_calls_total", map[string]string{"backend": "os-1"}); after != before {
		t.Errorf("a request under no endpoint was counted (%v -> %v)", before, after)
	}
}

// TestTransportGivesUp: after Retries throttled attempts the last answer is
// returned; a cancelled context ends the backoff with an error.
func TestTransportGivesUp(t *testing.T) {
	srv := &throttlingServer{n: 100, status: http.StatusTooManyRequests}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	var waits []time.Duration
	tr := newTransport(hs.URL, &waits)
	tr.Retries, tr.MaxBackoff = 3, time.Second
	resp, err := (&http.Client{Transport: tr}).Get(hs.URL + "/v2/x")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || len(srv.bodies) != 4 {
		t.Errorf("status %d after %d attempts, want 429 after 4", resp.StatusCode, len(srv.bodies))
	}
	for _, w := range waits {
		if w <= 0 || w > time.Second {
			t.Errorf("a jittered backoff of %v, want within (0, 1s]", w)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	tr.sleep = func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() }
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/v2/x", nil)
	if _, err := (&http.Client{Transport: tr}).Do(req); err == nil || !strings.Contains(err.Error(), "throttled (HTTP 429)") {
		t.Errorf("cancelled during the backoff: %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"7": 7 * time.Second, " 0 ": 0,
		"Fri, 27 Nov 2026 08:00:30 GMT": 30 * time.Second,
		"Fri, 27 Nov 2026 07:00:00 GMT": 0,
	} {
		if got, ok := parseRetryAfter(v, now); !ok || got != want {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "-1", "soon"} {
		if _, ok := parseRetryAfter(v, now); ok {
			t.Errorf("parseRetryAfter(%q) accepted", v)
		}
	}
}

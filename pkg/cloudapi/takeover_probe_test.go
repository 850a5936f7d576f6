package cloudapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestGatedMutationBoundedByClientTimeout: the gate is a check, not a
// deadline: a create that passes it just before the hold ends and then
// waits in the transport below (a connection slow to come, the process
// paused between the check and the socket) is sent after the hold ended
// (review probe of the takeover wait). What bounds it is the client's
// timeout, which the Transport keeps: the call is sent within it of the
// gate's check or not at all, so LandingAfterTakeover's callers count the
// request timeout on top of their landing window.
func TestGatedMutationBoundedByClientTimeout(t *testing.T) {
	var arrived atomic.Pointer[time.Time]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		now := time.Now()
		arrived.Store(&now)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	holdEnd := time.Now().Add(300 * time.Millisecond)
	old := SetMutationGate(func(context.Context) error {
		if time.Now().Before(holdEnd) {
			return nil
		}
		return errors.New("this replica may no longer lead")
	})
	t.Cleanup(func() { SetMutationGate(old) })
	const timeout = time.Second
	for _, tc := range []struct {
		name   string
		slow   time.Duration
		landed bool
	}{
		{"sent after the hold ended, within the timeout", time.Until(holdEnd) + 300*time.Millisecond, true},
		{"slower than the timeout", 2 * timeout, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived.Store(nil)
			slow := roundTripper(func(r *http.Request) (*http.Response, error) {
				select { // the connection is slow to come
				case <-time.After(tc.slow):
				case <-r.Context().Done():
					return nil, r.Context().Err()
				}
				return http.DefaultTransport.RoundTrip(r)
			})
			tr := &Transport{Next: slow, Budget: NewBudget("probe", nil, nil), DefaultAPI: "load-balancer"}
			client := &http.Client{Transport: tr, Timeout: timeout}
			checked := time.Now()
			resp, err := client.Post(srv.URL+"/v2/lbaas/loadbalancers", "application/json", strings.NewReader(`{"loadbalancer":{}}`))
			if err == nil {
				_ = resp.Body.Close()
			}
			time.Sleep(100 * time.Millisecond)
			at := arrived.Load()
			switch {
			case tc.landed && (err != nil || at == nil):
				t.Fatalf("the create: %v (arrived %v), want it sent", err, at)
			case tc.landed && at.Sub(checked) >= timeout:
				t.Errorf("sent %s after the gate's check, past the client's timeout %s", at.Sub(checked), timeout)
			case !tc.landed && at != nil:
				t.Errorf("a create the client gave up on reached the cloud %s after the gate's check (timeout %s): the Transport dropped the request's deadline",
					at.Sub(checked).Round(time.Millisecond), timeout)
			case !tc.landed && err == nil:
				t.Errorf("the create slower than the client's timeout succeeded")
			}
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

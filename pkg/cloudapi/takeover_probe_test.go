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

// TestProbeGatedMutationLeavesBeforeHoldEnds: LandingAfterTakeover counts
// the previous leader's changes from the takeover because "its calls all
// left before its hold of the lease ended". The gate is a check, not a
// deadline: a create that passes it just before the hold ends and then
// waits in the transport below (a connection being dialled to an API
// that is slow to accept, SYNs retransmitted; the process paused between
// the check and the socket) is sent after the hold ended, after the other
// replica may have taken over (the fence's margin, 1.5 s by default,
// after the gate closed), bounded only by the client's timeout (30 s for
// OpenStack). The
// fence gives the API server's writes a deadline at the end of the
// window for this reason (pkg/fence, deadlined); cloud mutations get none.
func TestProbeGatedMutationLeavesBeforeHoldEnds(t *testing.T) {
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
	dialling := roundTripper(func(r *http.Request) (*http.Response, error) {
		time.Sleep(time.Until(holdEnd) + 500*time.Millisecond) // the connection is slow to come
		return http.DefaultTransport.RoundTrip(r)
	})
	tr := &Transport{Next: dialling, Budget: NewBudget("probe", nil, nil), DefaultAPI: "load-balancer"}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	resp, err := client.Post(srv.URL+"/v2/lbaas/loadbalancers", "application/json", strings.NewReader(`{"loadbalancer":{}}`))
	if err != nil {
		t.Fatalf("the create, gated while the hold was on: %v", err)
	}
	_ = resp.Body.Close()
	at := arrived.Load()
	if at == nil {
		t.Fatal("the create never reached the server")
	}
	if at.After(holdEnd) {
		t.Errorf("a mutation that passed the gate reached the cloud %s after the hold ended (the gate closed then): a previous leader's call may leave after the takeover, which LandingAfterTakeover assumes it does not",
			at.Sub(holdEnd).Round(time.Millisecond))
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

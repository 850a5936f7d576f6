package fence

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestProbeLeaseDurationSecondsTruncated shows that the fence's bound comes
// from --leader-elect-lease-duration, while the other replicas wait for
// the lease's spec.leaseDurationSeconds, which upstream's elector writes
// as int(LeaseDuration / time.Second), truncated to whole seconds
// (client-go tools/leaderelection tryAcquireOrRenew; the follower's
// isLeaseValid is observedTime + LeaseDurationSeconds). With
// --leader-elect-lease-duration=1500ms the lease says 1 s: a standby may
// take over 1 s after it saw the renewal, but the fence stays open until
// 1.35 s after it was sent, so a write 1.2 s after the renewal passes while
// another replica may already lead.
//
// Expected to FAIL until the bound is taken from the leaseDurationSeconds
// of the Lease the elector wrote (or the flag truncated to seconds).
func TestProbeLeaseDurationSecondsTruncated(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	flag := 1500 * time.Millisecond
	f, err := New(Options{Namespace: "kube-system", Name: leaseName, LeaseDuration: flag, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	api := &fakeAPI{clock: clk}
	rt := f.Wrap(api)
	// The elector's create, as tryAcquireOrRenew builds it from the flag.
	lease := newLease(leaseName, ourID)
	secs := int32(flag / time.Second)
	lease.Spec.LeaseDurationSeconds = &secs
	body := encoded(t, lease, true)
	api.answer = func(*http.Request) (int, []byte) { return http.StatusCreated, body }
	sent := clk.Now()
	if err := do(t, rt, http.MethodPost, leasePath, body); err != nil {
		t.Fatal(err)
	}
	api.answer = nil
	// A standby that saw the create at once may lead from sent + 1 s.
	standbyMayLead := sent.Add(time.Duration(secs) * time.Second)
	clk.SetTime(standbyMayLead.Add(200 * time.Millisecond))
	err = do(t, rt, http.MethodPatch, svcStatus, []byte(`{}`))
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("a write %s after the renewal passed (err %v), but the lease says leaseDurationSeconds=%d: a standby may lead since %s after it",
			clk.Since(sent), err, secs, standbyMayLead.Sub(sent))
	}
}

// TestProbeWriteQueuedInTransportPastBound shows that the fence checks a
// write once, on its way into the transport, and not again when it
// actually leaves: a write admitted while the fence is open but then held
// inside the transport below (here a real net/http Transport waiting for
// its only connection, held by a slow request; equally a process paused
// between the check and the socket write, or a request waiting for an
// HTTP/2 stream) reaches the API server after the lease duration since the
// last renewal, when another replica may lead. The package's doc promises
// "A write checked before that time (minus a margin for its transit)
// reaches the API server while the replica still holds the lease"; the
// margin is no bound on transit.
//
// Expected to FAIL. Suggested fix: give each admitted write a context
// deadline at renewed + bound (the request's own deadline if earlier), so
// that the transport drops it if it has not gone out by then; net/http
// checks the context while waiting for a connection and before writing.
func TestProbeWriteQueuedInTransportPastBound(t *testing.T) {
	lease := 1 * time.Second
	var (
		mu       sync.Mutex
		arrivals = map[string]time.Time{}
	)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		arrivals[r.Method+" "+r.URL.Path] = time.Now()
		mu.Unlock()
		if r.URL.Path == nodePath {
			<-release // a slow write holds the only connection
		}
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	f, err := New(Options{Namespace: "kube-system", Name: leaseName, LeaseDuration: lease})
	if err != nil {
		t.Fatal(err)
	}
	next := &http.Transport{MaxConnsPerHost: 1}
	t.Cleanup(next.CloseIdleConnections)
	client := &http.Client{Transport: f.Wrap(next)}
	send := func(method, path string, body []byte) error {
		req, err := http.NewRequestWithContext(context.Background(), method, srv.URL+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	renewed := time.Now()
	if err := send(http.MethodPost, leasePath, encoded(t, newLease(leaseName, ourID), false)); err != nil {
		t.Fatal(err)
	}
	slow := make(chan error, 1)
	go func() { slow <- send(http.MethodPut, nodePath, []byte(`{}`)) }()
	// Let the slow write take the connection, then send the next one well
	// inside the bound.
	time.Sleep(100 * time.Millisecond)
	queued := make(chan error, 1)
	go func() { queued <- send(http.MethodPatch, svcStatus, []byte(`{}`)) }()
	time.Sleep(100 * time.Millisecond)
	if !f.Holds() {
		t.Fatal("the fence closed too early for the probe")
	}
	// The lease expires for the standbys; then, a second later, the
	// connection frees up. (200 ms later was too soon for a loaded 2-core
	// machine under -race: a .ci/run of aefd53b here, load 16, saw the queued write reach
	// the server 1.55 s after the renewal, its deadline's timer not yet run
	// when the connection came free; the second is slack for the timer,
	// not for the fence.)
	time.Sleep(time.Until(renewed.Add(lease + time.Second)))
	close(release)
	if err := <-slow; err != nil {
		// It reached the API server in time; an error for its late
		// answer (as a deadline would give) is no matter here.
		t.Logf("the slow write: %v", err)
	}
	qerr := <-queued
	mu.Lock()
	at, reached := arrivals["PATCH "+svcStatus]
	mu.Unlock()
	if reached && at.Sub(renewed) >= lease {
		t.Fatalf("a write the fence admitted %s after the renewal reached the API server %s after it, past the lease duration %s (err %v)",
			200*time.Millisecond, at.Sub(renewed).Round(time.Millisecond), lease, qerr)
	}
}

// TestProbeRefusalLogRateLimited: a burst of refused writes (a fenced
// replica's controllers retrying) logs one line, the next line comes only
// after logInterval and counts the refusals in between, and the metric
// counts every one. Passes: no defect found.
func TestProbeRefusalLogRateLimited(t *testing.T) {
	var buf syncBuffer
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	t.Cleanup(func() { klog.SetOutput(io.Discard); klog.LogToStderr(true) })
	_, clk, _, rt := setup(t)
	before, _ := testutil.GetCounterMetricValue(refusedRequests.WithLabelValues(http.MethodPatch))
	for range 100 {
		if err := do(t, rt, http.MethodPatch, svcStatus, []byte(`{}`)); !errors.Is(err, ErrFenced) {
			t.Fatalf("a write of a replica that never held the lease: %v", err)
		}
	}
	klog.Flush()
	if n := strings.Count(buf.String(), "Refused a write"); n != 1 {
		t.Fatalf("100 refusals within a second logged %d lines, want 1:\n%s", n, buf.String())
	}
	clk.SetTime(clk.Now().Add(logInterval))
	if err := do(t, rt, http.MethodPatch, svcStatus, []byte(`{}`)); !errors.Is(err, ErrFenced) {
		t.Fatal(err)
	}
	klog.Flush()
	if n := strings.Count(buf.String(), "Refused a write"); n != 2 || !strings.Contains(buf.String(), "refusedSinceLastLine=99") {
		t.Fatalf("after %s: %d lines, want 2 with refusedSinceLastLine=99:\n%s", logInterval, n, buf.String())
	}
	after, _ := testutil.GetCounterMetricValue(refusedRequests.WithLabelValues(http.MethodPatch))
	if after-before != 101 {
		t.Fatalf("the metric counted %v refusals, want 101", after-before)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestProbeHealthySlowRenewsFenced: review 49 found a healthy leader with
// valid flags (lease 15 s, renew deadline 14 s, retry 7 s) whose renewals
// all succeed but are answered slowly has its writes refused for a moment
// each cycle. That stall is the price of the fence's safety; such timings
// are now named at startup (CheckTimings, a warning of the binary), and with
// the default timings (15 s, 10 s, 2 s) a leader whose every request takes
// its client's whole timeout (renew deadline / 2, for the read and the
// update) is never refused.
func TestProbeHealthySlowRenewsFenced(t *testing.T) {
	if err := CheckTimings(15*time.Second, 14*time.Second, 7*time.Second); err == nil ||
		!strings.Contains(err.Error(), "--leader-elect-retry-period") || !strings.Contains(err.Error(), "--leader-elect-renew-deadline") {
		t.Fatalf("CheckTimings(15s, 14s, 7s) = %v, want an error naming the flags", err)
	}
	if err := CheckTimings(15*time.Second, 10*time.Second, 2*time.Second); err != nil {
		t.Fatalf("CheckTimings of the defaults: %v", err)
	}
	const (
		lease   = 15 * time.Second
		retry   = 2 * time.Second
		timeout = 5 * time.Second // the elector's client: renew deadline / 2
	)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	f, err := New(Options{Namespace: "kube-system", Name: leaseName, LeaseDuration: lease, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	api := &fakeAPI{clock: clk}
	rt := f.Wrap(api)
	acquire(t, api, rt, http.MethodPost, ourID, http.StatusCreated, false)
	for cycle := range 3 {
		sent := clk.Now()
		api.delay = timeout - 10*time.Millisecond
		acquire(t, api, rt, http.MethodPut, ourID, http.StatusOK, false)
		api.delay = 0
		// The elector waits the retry period, reads the lease (its whole
		// timeout), then sends the next update; a controller writes just
		// before it.
		clk.SetTime(clk.Now().Add(retry + timeout - 20*time.Millisecond))
		if err := do(t, rt, http.MethodPatch, svcStatus, []byte(`{}`)); err != nil {
			t.Fatalf("cycle %d: a healthy leader's write %s after a successful renewal was sent: %v", cycle, clk.Since(sent), err)
		}
		clk.SetTime(clk.Now().Add(10 * time.Millisecond))
	}
}

package fence

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	leasePath  = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
	svcStatus  = "/api/v1/namespaces/default/services/web/status"
	nodePath   = "/api/v1/nodes/worker-0"
	leaseName  = "mccm"
	ourID      = "host-a_1234"
	leaseDur   = 15 * time.Second
	wantBound  = leaseDur - leaseDur/10
	otherID    = "host-b_5678"
	eventsPath = "/api/v1/namespaces/default/events"
)

// fakeAPI is the RoundTripper behind the fence: it records what reached it
// and answers each request with the status answer gives (200 by default),
// advancing the clock by delay first (a slow API server).
type fakeAPI struct {
	mu      sync.Mutex
	clock   *clocktesting.FakePassiveClock
	delay   time.Duration
	answer  func(*http.Request) (int, []byte)
	reached []string
}

func (a *fakeAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	a.mu.Lock()
	a.reached = append(a.reached, req.Method+" "+req.URL.Path)
	a.mu.Unlock()
	if req.Body != nil {
		if _, err := io.ReadAll(req.Body); err != nil {
			return nil, err
		}
	}
	if a.delay > 0 {
		a.clock.SetTime(a.clock.Now().Add(a.delay))
	}
	code, body := http.StatusOK, []byte("{}")
	if a.answer != nil {
		code, body = a.answer(req)
	}
	return &http.Response{StatusCode: code, Body: io.NopCloser(bytes.NewReader(body)), Header: http.Header{}, Request: req}, nil
}

func (a *fakeAPI) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.reached)
}

// setup returns a fence on the kube-system/mccm Lease, its clock, the fake
// API behind it and the fenced RoundTripper.
func setup(t *testing.T) (*Fence, *clocktesting.FakePassiveClock, *fakeAPI, http.RoundTripper) {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	f, err := New(Options{Namespace: "kube-system", Name: leaseName, Exempt: []string{"mccm-migration"}, LeaseDuration: leaseDur, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	api := &fakeAPI{clock: clk}
	return f, clk, api, f.Wrap(api)
}

func newLease(name, holder string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name},
	}
	l.Spec.HolderIdentity = &holder
	return l
}

// encoded is lease as JSON, or as protobuf (the controller manager's
// default content type) with pb.
func encoded(t *testing.T, lease *coordinationv1.Lease, pb bool) []byte {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var enc runtime.Encoder = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{})
	if pb {
		enc = protobuf.NewSerializer(scheme, scheme)
	}
	var buf bytes.Buffer
	if err := enc.Encode(lease, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func request(t *testing.T, method, path string, body []byte) *http.Request {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	return httptest.NewRequest(method, "https://10.0.0.1:6443"+path, r)
}

// do sends one request through rt and returns its error.
func do(t *testing.T, rt http.RoundTripper, method, path string, body []byte) error {
	t.Helper()
	resp, err := rt.RoundTrip(request(t, method, path, body))
	if err == nil {
		_ = resp.Body.Close()
	}
	return err
}

// acquire writes the Lease as the elector does, answered with code.
func acquire(t *testing.T, api *fakeAPI, rt http.RoundTripper, method, holder string, code int, pb bool) {
	t.Helper()
	body := encoded(t, newLease(leaseName, holder), pb)
	api.answer = func(*http.Request) (int, []byte) { return code, body }
	path := leasePath
	if method == http.MethodPut {
		path += "/" + leaseName
	}
	if err := do(t, rt, method, path, body); err != nil {
		t.Fatalf("the lease's own %s was refused: %v", method, err)
	}
	api.answer = nil
}

func TestClosedUntilAcquired(t *testing.T) {
	_, _, api, rt := setup(t)
	before, _ := testutil.GetCounterMetricValue(refusedRequests.WithLabelValues(http.MethodPatch))
	for _, path := range []string{svcStatus, nodePath, eventsPath} {
		err := do(t, rt, http.MethodPatch, path, []byte(`{}`))
		if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "does not hold the leader-election lease kube-system/mccm") {
			t.Errorf("PATCH %s before any acquisition: got %v, want the fence's refusal", path, err)
		}
	}
	after, _ := testutil.GetCounterMetricValue(refusedRequests.WithLabelValues(http.MethodPatch))
	if after-before != 3 {
		t.Errorf("refused PATCHes counted %v, want 3", after-before)
	}
	if api.count() != 0 {
		t.Fatalf("refused writes reached the API server: %v", api.reached)
	}
	// Reads, lists and watches are never fenced; nor are the Lease's own
	// requests (the elector must be able to acquire it).
	for _, path := range []string{svcStatus, "/api/v1/services?watch=true", "/api/v1/nodes", leasePath + "/" + leaseName} {
		if err := do(t, rt, http.MethodGet, path, nil); err != nil {
			t.Errorf("GET %s: %v", path, err)
		}
	}
	acquire(t, api, rt, http.MethodPost, ourID, http.StatusCreated, false)
	if err := do(t, rt, http.MethodPatch, svcStatus, []byte(`{}`)); err != nil {
		t.Fatalf("PATCH right after the acquisition: %v", err)
	}
}

// TestBound: a write passes while the last renewal was sent less than the
// lease duration less the margin ago, from the send (not the answer): the
// follower counts from when it saw the renewal, which is after it was
// sent. Renewals answered with an error do not count.
func TestBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		pb   bool
	}{{"json", false}, {"protobuf", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f, clk, api, rt := setup(t)
			acquire(t, api, rt, http.MethodPost, ourID, http.StatusCreated, tc.pb)
			api.delay = 3 * time.Second // the renewal is answered 3 s after it was sent
			sent := clk.Now()
			acquire(t, api, rt, http.MethodPut, ourID, http.StatusOK, tc.pb)
			api.delay = 0
			clk.SetTime(sent.Add(wantBound - time.Millisecond))
			if err := do(t, rt, http.MethodPut, nodePath, []byte(`{}`)); err != nil || !f.Holds() {
				t.Fatalf("PUT %s after the renewal: %v (holds %v)", time.Since(sent), err, f.Holds())
			}
			clk.SetTime(sent.Add(wantBound))
			err := do(t, rt, http.MethodDelete, nodePath, nil)
			if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "last renewal of the leader-election lease kube-system/mccm 13.5s ago") {
				t.Fatalf("DELETE at the bound: got %v, want the fence's refusal naming the renewal's age", err)
			}
			// A renewal the API server refuses (the lease was taken: a
			// conflict) does not reopen the fence.
			acquire(t, api, rt, http.MethodPut, ourID, http.StatusConflict, tc.pb)
			if err := do(t, rt, http.MethodPost, eventsPath, []byte(`{}`)); !errors.Is(err, ErrFenced) {
				t.Fatalf("POST after a refused renewal: got %v, want refused", err)
			}
			acquire(t, api, rt, http.MethodPut, ourID, http.StatusOK, tc.pb)
			if err := do(t, rt, http.MethodPost, eventsPath, []byte(`{}`)); err != nil {
				t.Fatalf("POST after a renewal: %v", err)
			}
		})
	}
}

// TestLostLease: a read of the Lease naming another holder, or our release
// of it, closes the fence before the bound.
func TestLostLease(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, api *fakeAPI, rt http.RoundTripper)
	}{
		{"another holder read", func(t *testing.T, api *fakeAPI, rt http.RoundTripper) {
			body := encoded(t, newLease(leaseName, otherID), true)
			api.answer = func(*http.Request) (int, []byte) { return http.StatusOK, body }
			resp, err := rt.RoundTrip(request(t, http.MethodGet, leasePath+"/"+leaseName, nil))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			if !bytes.Equal(got, body) {
				t.Fatalf("the Lease read by the elector was changed by the fence")
			}
		}},
		{"released", func(t *testing.T, api *fakeAPI, rt http.RoundTripper) {
			acquire(t, api, rt, http.MethodPut, "", http.StatusOK, false)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, api, rt := setup(t)
			acquire(t, api, rt, http.MethodPost, ourID, http.StatusCreated, false)
			tc.lose(t, api, rt)
			api.answer = nil
			if err := do(t, rt, http.MethodPatch, svcStatus, []byte(`{}`)); !errors.Is(err, ErrFenced) || f.Holds() {
				t.Fatalf("PATCH after the lease was lost: got %v (holds %v), want refused", err, f.Holds())
			}
		})
	}
}

// TestOtherLeases: only the followed Lease (and exempt ones, leader
// migration's) pass unfenced; a Lease of the namespace named otherwise,
// or the same name in another namespace, is a write as any other.
func TestOtherLeases(t *testing.T) {
	_, _, api, rt := setup(t)
	for _, tc := range []struct {
		method, path string
		body         []byte
		pass         bool
	}{
		{http.MethodPost, leasePath, encoded(t, newLease("mccm-migration", ourID), false), true},
		{http.MethodPut, leasePath + "/mccm-migration", encoded(t, newLease("mccm-migration", ourID), false), true},
		{http.MethodPost, leasePath, encoded(t, newLease("someone-else", ourID), false), false},
		{http.MethodPost, leasePath, []byte("not a lease"), false},
		{http.MethodPut, leasePath + "/someone-else", encoded(t, newLease("someone-else", ourID), false), false},
		{http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/default/leases/" + leaseName, []byte(`{}`), false},
	} {
		err := do(t, rt, tc.method, tc.path, tc.body)
		if tc.pass != (err == nil) || (err != nil && !errors.Is(err, ErrFenced)) {
			t.Errorf("%s %s (%.20q) before any acquisition: got %v, want passed %v", tc.method, tc.path, tc.body, err, tc.pass)
		}
	}
	if api.count() != 2 {
		t.Errorf("reached the API server: %v, want the exempt Lease's two writes", api.reached)
	}
	// Neither the exempt Lease's writes nor the refused ones opened it.
	if err := do(t, rt, http.MethodPatch, svcStatus, []byte(`{}`)); !errors.Is(err, ErrFenced) {
		t.Fatalf("PATCH after other Leases' writes: got %v, want refused", err)
	}
}

// TestServerPathPrefix: a server URL with a path (a proxy's) still finds
// the Lease's requests.
func TestServerPathPrefix(t *testing.T) {
	f, _, api, rt := setup(t)
	body := encoded(t, newLease(leaseName, ourID), false)
	api.answer = func(*http.Request) (int, []byte) { return http.StatusOK, body }
	if err := do(t, rt, http.MethodPut, "/k8s/clusters/c-1"+leasePath+"/"+leaseName, body); err != nil || !f.Holds() {
		t.Fatalf("renewal through a prefixed server URL: %v (holds %v)", err, f.Holds())
	}
}

// TestRefusedBodyClosed: a refused request's body is closed, as a
// RoundTripper must.
func TestRefusedBodyClosed(t *testing.T) {
	_, _, _, rt := setup(t)
	body := &closeRecorder{Reader: strings.NewReader("{}")}
	req := request(t, http.MethodPost, eventsPath, nil)
	req.Body = body
	if _, err := rt.RoundTrip(req); !errors.Is(err, ErrFenced) {
		t.Fatalf("got %v, want refused", err)
	}
	if !body.closed {
		t.Fatal("the refused request's body was not closed")
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestWrapOnce(t *testing.T) {
	f, _, _, rt := setup(t)
	if again := f.Wrap(rt); again != rt {
		t.Fatal("wrapping a fenced transport again added a second fence")
	}
	other, err := New(Options{Namespace: "kube-system", Name: leaseName, LeaseDuration: leaseDur})
	if err != nil {
		t.Fatal(err)
	}
	if other.Wrap(rt) == rt {
		t.Fatal("another fence did not wrap")
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Name: leaseName, LeaseDuration: leaseDur}, "--leader-elect-resource-namespace"},
		{Options{Namespace: "kube-system", Name: leaseName}, "--leader-elect-lease-duration must be positive"},
		{Options{Namespace: "kube-system", Name: leaseName, LeaseDuration: time.Second, Margin: 2 * time.Second}, "margin 2s"},
	} {
		if _, err := New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): got %v, want an error with %q", tc.opts, err, tc.want)
		}
	}
}

// TestTookOver: a replica that becomes the holder by updating a Lease that
// existed took over (another replica may have led before it, with cloud
// calls on their way): TookOver is when its winning write was sent, kept
// across its renewals; one that created the Lease took nothing over; a
// lost hold reads zero, and holding again is a new takeover.
func TestTookOver(t *testing.T) {
	f, _, api, rt := setup(t)
	if got := f.TookOver(); !got.IsZero() {
		t.Fatalf("TookOver before any acquisition: %v", got)
	}
	acquire(t, api, rt, http.MethodPost, ourID, http.StatusCreated, false)
	if got := f.TookOver(); !got.IsZero() {
		t.Errorf("TookOver after creating the Lease: %v, want zero", got)
	}

	f, clk, api, rt := setup(t)
	won := clk.Now()
	acquire(t, api, rt, http.MethodPut, ourID, http.StatusOK, true)
	clk.SetTime(clk.Now().Add(2 * time.Second))
	acquire(t, api, rt, http.MethodPut, ourID, http.StatusOK, true) // a renewal
	if got := f.TookOver(); !got.Equal(won) {
		t.Errorf("TookOver after updating an existing Lease and renewing it: %v, want %v (the winning write)", got, won)
	}

	body := encoded(t, newLease(leaseName, otherID), false)
	api.answer = func(*http.Request) (int, []byte) { return http.StatusOK, body }
	if err := do(t, rt, http.MethodGet, leasePath+"/"+leaseName, nil); err != nil {
		t.Fatal(err)
	}
	api.answer = nil
	if got := f.TookOver(); !got.IsZero() {
		t.Errorf("TookOver after another holder was read: %v, want zero", got)
	}
	clk.SetTime(clk.Now().Add(30 * time.Second))
	again := clk.Now()
	acquire(t, api, rt, http.MethodPut, ourID, http.StatusOK, false)
	if got := f.TookOver(); !got.Equal(again) {
		t.Errorf("TookOver after holding it again: %v, want %v", got, again)
	}

	// An answer that is not a success does not make this replica the
	// holder, nor a takeover.
	f, _, api, rt = setup(t)
	acquire(t, api, rt, http.MethodPut, ourID, http.StatusConflict, false)
	if got := f.TookOver(); !got.IsZero() {
		t.Errorf("TookOver after a refused update: %v, want zero", got)
	}
}

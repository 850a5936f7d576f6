package vsphere

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/vim25/soap"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// soapBudget is a govmomi soap.RoundTripper that makes every SOAP
// call of a vCenter session wait for a token of the budget's vcenter
// bucket (reads apart from the rest, soapMutating) and counts it in
// calls_total with the method as the action. A throttling answer is
// retried (see Call). Install it as a vim25 client's RoundTripper
// (vim25.Client.RoundTripper), as govmomi's own keep-alive and session
// handlers are installed, over a soap.Client whose HTTP transport is
// wrapped in retryAfterRecorder.
type soapBudget struct {
	Next   soap.RoundTripper
	Budget *cloudapi.Budget
}

// RoundTrip sends one SOAP call within the budget and counts it.
func (t *soapBudget) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	action := soapAction(req)
	return t.Call(ctx, action, soapMutating(action), func(ctx context.Context) error { return t.Next.RoundTrip(ctx, req, res) })
}

// Call runs one call of the session within the budget and counts it under
// action, each attempt apart; call is also how the calls that do not go
// through the RoundTripper (the service content a vim25 client reads as
// it is made) are sent. A throttling answer is retried, each attempt
// waiting for its token, as pkg/cloudapi's Transport retries one over
// HTTP (cloudapi.DefaultHTTPRetries times, after cloudapi.RetryWait): an
// HTTP 429 always (the server refused the call unprocessed), a 503 only
// for a read, since a change answered 503 may have been half done and is
// left to its caller. A retry whose wait would pass ctx's deadline is not
// made: the throttling error is returned at once.
func (t *soapBudget) Call(ctx context.Context, action string, write bool, call func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		wait, err := t.attempt(ctx, action, write, attempt, call)
		if wait < 0 {
			return err
		}
		if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
			return fmt.Errorf("%w (throttled %d times; the next attempt, in %v, would pass the call's deadline)", err, attempt+1, wait.Round(time.Millisecond))
		}
		if werr := cloudapi.Sleep(ctx, wait); werr != nil {
			return fmt.Errorf("%w (throttled %d times), and %w while backing off", err, attempt+1, werr)
		}
	}
}

// attempt sends the call once within the budget, counts it, and says how
// long to wait before the next attempt: negative for none (a success, an
// error that is no throttling, a 503 of a change, or no attempts left).
func (t *soapBudget) attempt(ctx context.Context, action string, write bool, attempt int, call func(context.Context) error) (time.Duration, error) {
	if err := t.wait(ctx, action, write); err != nil {
		return -1, err
	}
	hint := &retryAfterHint{}
	start := time.Now()
	err := call(context.WithValue(ctx, retryAfterKey{}, hint))
	if answered := hint.status(); err != nil && answered != 0 && answered != http.StatusOK && answered != http.StatusInternalServerError {
		err = &httpStatusError{Status: answered, Err: err}
	}
	status := throttleStatus(err)
	outcome := cloudapi.OutcomeSuccess
	switch {
	case status != 0:
		outcome = cloudapi.OutcomeThrottled
	case err != nil:
		outcome = cloudapi.OutcomeError
	}
	t.Budget.Observe(cloudapi.APIVCenter, action, write, outcome, time.Since(start))
	retry := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable && !write
	if !retry || attempt >= cloudapi.DefaultHTTPRetries {
		return -1, err
	}
	return cloudapi.RetryWait(attempt, hint.get(), cloudapi.DefaultHTTPMaxBackoff), err
}

// wait takes the call's token; a login or logout changes only the
// session's own state and is not put to the mutation gate (a standby
// keeps the session its reads need).
func (t *soapBudget) wait(ctx context.Context, action string, write bool) error {
	if write && soapSession(action) {
		return t.Budget.WaitSession(ctx, cloudapi.APIVCenter, action)
	}
	return t.Budget.WaitAction(ctx, cloudapi.APIVCenter, action, write)
}

// soapSession tells whether a vSphere method only opens or closes the
// client's own session: Login*, Logout, CloneSession,
// AcquireCloneTicket, AcquireGenericServiceTicket.
func soapSession(method string) bool {
	switch method {
	case "Logout", "CloneSession", "AcquireCloneTicket", "AcquireGenericServiceTicket":
		return true
	}
	return strings.HasPrefix(method, "Login")
}

// vapiSession tells whether a vAPI request opens or closes the client's
// session (POST or DELETE of /rest/com/vmware/cis/session or
// /api/session): not put to the mutation gate.
func vapiSession(r *http.Request) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	return strings.HasSuffix(p, "/rest/com/vmware/cis/session") || strings.HasSuffix(p, "/api/session")
}

// retryAfterKey is the context key of a SOAP call's retryAfterHint.
type retryAfterKey struct{}

// retryAfterHint carries the status and Retry-After header of a SOAP call's answer
// from the HTTP transport under govmomi's soap.Client back to soapBudget:
// govmomi's error for an answer other than 200 or 500 (a url.Error around
// an unexported statusError) keeps the response but shows only its status
// line, so the header is read on its way up (retryAfterRecorder).
type retryAfterHint struct {
	mu     sync.Mutex
	value  string
	answer int
}

// set records an answer's status and Retry-After header.
func (h *retryAfterHint) set(status int, v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answer, h.value = status, v
}

// status is the last answer's HTTP status, 0 before any.
func (h *retryAfterHint) status() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.answer
}

func (h *retryAfterHint) get() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.value
}

// retryAfterRecorder is the HTTP transport of a vCenter session's
// soap.Client: it hands each answer's Retry-After header to the call's
// retryAfterHint, if the request's context has one (govmomi sends a SOAP
// call with the call's context).
type retryAfterRecorder struct {
	Next http.RoundTripper
}

// RoundTrip sends r and records its answer's Retry-After.
func (t *retryAfterRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.Next.RoundTrip(r)
	if h, ok := r.Context().Value(retryAfterKey{}).(*retryAfterHint); ok && resp != nil {
		h.set(resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	return resp, err
}

// soapAction names a govmomi request by its method: the request body's
// type without its Body suffix (methods.RetrievePropertiesExBody is
// RetrievePropertiesEx).
func soapAction(req soap.HasFault) string {
	t := reflect.TypeOf(req)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Name() == "" {
		return "unknown"
	}
	return strings.TrimSuffix(t.Name(), "Body")
}

// soapMutating tells whether a vSphere method changes state (a login
// counts as a change): every method but Retrieve*, ContinueRetrieve*,
// Find*, Query*, Has*, Wait*, Fetch*, CurrentTime, SessionIsActive and
// the views a read makes and drops (Create*View, DestroyView), which
// change nothing but the session's own bookkeeping.
func soapMutating(method string) bool {
	for _, p := range []string{"Retrieve", "ContinueRetrieve", "Find", "Query", "Has", "Wait", "Fetch"} {
		if strings.HasPrefix(method, p) {
			return false
		}
	}
	if strings.HasPrefix(method, "Create") && strings.HasSuffix(method, "View") {
		return false
	}
	switch method {
	case "CurrentTime", "SessionIsActive", "DestroyView":
		return false
	}
	return true
}

// throttleStatus is the HTTP status of a SOAP call answered 429 or 503
// (attempt wraps govmomi's error with the answer's status), or 0.
func throttleStatus(err error) int {
	var se *httpStatusError
	if errors.As(err, &se) && (se.Status == http.StatusTooManyRequests || se.Status == http.StatusServiceUnavailable) {
		return se.Status
	}
	return 0
}

// replayable is the vAPI (tagging) session's transport over
// cloudapi.Transport, which retries a throttling answer only when it can
// send the request's body again: govmomi gives a request without a body
// (every GET, the session's login) an empty io.MultiReader, which
// net/http cannot replay, so replayable reads such a body first and makes
// it one that can be.
type replayable struct {
	Next http.RoundTripper
}

// RoundTrip sends r with a body that can be sent again, and records the
// answer's status for vapiCall.
func (t replayable) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.send(r)
	if h, ok := r.Context().Value(retryAfterKey{}).(*retryAfterHint); ok && resp != nil {
		h.set(resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	return resp, err
}

func (t replayable) send(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody || r.GetBody != nil {
		return t.Next.RoundTrip(r)
	}
	b, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	c := r.Clone(r.Context())
	c.Body, c.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
	if len(b) > 0 {
		c.Body = io.NopCloser(bytes.NewReader(b))
		c.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	return t.Next.RoundTrip(c)
}

// vapiMutating tells whether a vAPI (REST) request of a vCenter session
// changes state: reads are GET, HEAD and the POSTs of list and get
// actions (~action=list-attached-tags-on-objects); a session created or
// deleted is a change.
func vapiMutating(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return false
	}
	a := vapiActionParam(r)
	return !strings.HasPrefix(a, "list") && !strings.HasPrefix(a, "get")
}

// vapiActionParam is a vAPI request's action: ~action= (the /rest API) or
// action= (the /api API).
func vapiActionParam(r *http.Request) string {
	q := r.URL.Query()
	if a := q.Get("~action"); a != "" {
		return a
	}
	return q.Get("action")
}

// vapiActionName names a vAPI request for calls_total: its method and the
// path up to the first object ID (IDs hold a colon, as URNs do), and its
// action, e.g. "POST /rest/com/vmware/cis/tagging/tag-association?action=list-attached-tags-on-objects".
func vapiActionName(r *http.Request) string {
	var kept []string
	for _, seg := range strings.Split(strings.Trim(r.URL.Path, "/"), "/") {
		if strings.Contains(seg, ":") || strings.Contains(seg, "%3A") {
			break
		}
		kept = append(kept, seg)
	}
	a := r.Method + " /" + strings.Join(kept, "/")
	if act := vapiActionParam(r); act != "" {
		a += "?action=" + act
	}
	return a
}

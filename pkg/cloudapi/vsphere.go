package cloudapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/vmware/govmomi/vim25/soap"
)

// APIVCenter is the budget's name of a vCenter's APIs: its SOAP API (vim25)
// and the vAPI REST endpoints of the same session (tagging).
const APIVCenter = "vcenter"

// VCenterDefaults are the vSphere backend's default budget, per vCenter
// session. vCenter publishes no request rate, and govc, the vSphere CSI
// driver and the vSphere cloud provider set no client-side rate (the
// providers' only knob, soap-roundtrip-count, is a retry count), so there
// is no figure to take a fraction of. The default is conservative and
// sized to what the backend does: an inventory refresh is three reads per
// datacenter and about three tagging calls, never slowed; what it bounds
// is the per-VM power-state reads cloud-node-lifecycle asks for every 5 s
// of each NotReady node (10 a second: 50 NotReady nodes before any waits)
// and logins (2 a second, a burst of 5: a re-login storm after vCenter
// restarts stays a trickle). Raise it in the backend's rateLimits.
var VCenterDefaults = map[string]RateLimit{
	APIVCenter: {QPS: 10, Bucket: 20, QPSWrite: 2, BucketWrite: 5},
}

// SOAPRoundTripper is a govmomi soap.RoundTripper that makes every SOAP
// call of a vCenter session wait for a token of the budget's vcenter
// bucket (reads apart from the rest, SOAPMutating) and counts it in
// calls_total with the method as the action. Install it as a vim25
// client's RoundTripper (vim25.Client.RoundTripper), as govmomi's own
// keep-alive and session handlers are installed.
type SOAPRoundTripper struct {
	Next   soap.RoundTripper
	Budget *Budget
}

// RoundTrip sends one SOAP call within the budget and counts it.
func (t *SOAPRoundTripper) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	action := SOAPAction(req)
	return t.Call(ctx, action, SOAPMutating(action), func() error { return t.Next.RoundTrip(ctx, req, res) })
}

// Call runs one call of the session that does not go through the
// RoundTripper (the service content a vim25 client reads as it is made)
// within the budget, and counts it under action.
func (t *SOAPRoundTripper) Call(ctx context.Context, action string, write bool, call func() error) error {
	if err := t.Budget.Wait(ctx, APIVCenter, write); err != nil {
		return err
	}
	start := time.Now()
	err := call()
	outcome := OutcomeSuccess
	switch {
	case isHTTPThrottle(err):
		outcome = OutcomeThrottled
	case err != nil:
		outcome = OutcomeError
	}
	Observe(t.Budget.Backend(), APIVCenter, action, outcome, time.Since(start))
	return err
}

// SOAPAction names a govmomi request by its method: the request body's
// type without its Body suffix (methods.RetrievePropertiesExBody is
// RetrievePropertiesEx).
func SOAPAction(req soap.HasFault) string {
	t := reflect.TypeOf(req)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Name() == "" {
		return "unknown"
	}
	return strings.TrimSuffix(t.Name(), "Body")
}

// SOAPMutating tells whether a vSphere method changes state (a login
// counts as a change): every method but Retrieve*, ContinueRetrieve*,
// Find*, Query*, Has*, Wait*, Fetch*, CurrentTime, SessionIsActive and
// the views a read makes and drops (Create*View, DestroyView), which
// change nothing but the session's own bookkeeping.
func SOAPMutating(method string) bool {
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

// isHTTPThrottle tells whether err is govmomi's error for an HTTP 429 or
// 503 answer (a url.Error around the response's status).
func isHTTPThrottle(err error) bool {
	var ue *url.Error
	if !errors.As(err, &ue) || ue.Err == nil {
		return false
	}
	status := ue.Err.Error()
	return strings.HasPrefix(status, "429") || strings.HasPrefix(status, "503")
}

// VAPIMutating tells whether a vAPI (REST) request of a vCenter session
// changes state: reads are GET, HEAD and the POSTs of list and get
// actions (~action=list-attached-tags-on-objects); a session created or
// deleted is a change.
func VAPIMutating(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return false
	}
	a := vapiAction(r)
	return !strings.HasPrefix(a, "list") && !strings.HasPrefix(a, "get")
}

// vapiAction is a vAPI request's action: ~action= (the /rest API) or
// action= (the /api API).
func vapiAction(r *http.Request) string {
	q := r.URL.Query()
	if a := q.Get("~action"); a != "" {
		return a
	}
	return q.Get("action")
}

// VAPIAction names a vAPI request for calls_total: its method and the
// path up to the first object ID (IDs hold a colon, as URNs do), and its
// action, e.g. "POST /rest/com/vmware/cis/tagging/tag-association?action=list-attached-tags-on-objects".
func VAPIAction(r *http.Request) string {
	var kept []string
	for _, seg := range strings.Split(strings.Trim(r.URL.Path, "/"), "/") {
		if strings.Contains(seg, ":") || strings.Contains(seg, "%3A") {
			break
		}
		kept = append(kept, seg)
	}
	a := r.Method + " /" + strings.Join(kept, "/")
	if act := vapiAction(r); act != "" {
		a += "?action=" + act
	}
	return a
}

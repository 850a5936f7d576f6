package vsphere

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/vmware/govmomi/vim25/soap"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// soapBudget is a govmomi soap.RoundTripper that makes every SOAP
// call of a vCenter session wait for a token of the budget's vcenter
// bucket (reads apart from the rest, soapMutating) and counts it in
// calls_total with the method as the action. Install it as a vim25
// client's RoundTripper (vim25.Client.RoundTripper), as govmomi's own
// keep-alive and session handlers are installed.
type soapBudget struct {
	Next   soap.RoundTripper
	Budget *cloudapi.Budget
}

// RoundTrip sends one SOAP call within the budget and counts it.
func (t *soapBudget) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	action := soapAction(req)
	return t.Call(ctx, action, soapMutating(action), func() error { return t.Next.RoundTrip(ctx, req, res) })
}

// Call runs one call of the session that does not go through the
// RoundTripper (the service content a vim25 client reads as it is made)
// within the budget, and counts it under action.
func (t *soapBudget) Call(ctx context.Context, action string, write bool, call func() error) error {
	if err := t.Budget.Wait(ctx, cloudapi.APIVCenter, write); err != nil {
		return err
	}
	start := time.Now()
	err := call()
	outcome := cloudapi.OutcomeSuccess
	switch {
	case isHTTPThrottle(err):
		outcome = cloudapi.OutcomeThrottled
	case err != nil:
		outcome = cloudapi.OutcomeError
	}
	cloudapi.Observe(t.Budget.Backend(), cloudapi.APIVCenter, action, outcome, time.Since(start))
	return err
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

package vsphere

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// TestSOAPNames: a govmomi request is named by its method; reads, view
// bookkeeping and session checks are reads, a login and a change are not.
func TestSOAPNames(t *testing.T) {
	for _, tc := range []struct {
		req    soap.HasFault
		action string
		write  bool
	}{
		{&methods.RetrievePropertiesExBody{}, "RetrievePropertiesEx", false},
		{&methods.ContinueRetrievePropertiesExBody{}, "ContinueRetrievePropertiesEx", false},
		{&methods.CreateContainerViewBody{}, "CreateContainerView", false},
		{&methods.DestroyViewBody{}, "DestroyView", false},
		{&methods.FindByUuidBody{}, "FindByUuid", false},
		{&methods.LoginBody{}, "Login", true},
		{&methods.PowerOffVM_TaskBody{}, "PowerOffVM_Task", true},
	} {
		if got := soapAction(tc.req); got != tc.action {
			t.Errorf("soapAction(%T) = %q, want %q", tc.req, got, tc.action)
		}
		if got := soapMutating(tc.action); got != tc.write {
			t.Errorf("soapMutating(%q) = %v, want %v", tc.action, got, tc.write)
		}
	}
}

// TestVAPINames: a vAPI request's action keeps its path up to the first
// ID and its ~action; list and get actions are reads.
func TestVAPINames(t *testing.T) {
	for _, tc := range []struct {
		method, url, action string
		write               bool
	}{
		{"GET", "https://vc/rest/com/vmware/cis/tagging/tag/id:urn:vmomi:InventoryServiceTag:1234:GLOBAL", "GET /rest/com/vmware/cis/tagging/tag", false},
		{"POST", "https://vc/rest/com/vmware/cis/tagging/tag-association?~action=list-attached-tags-on-objects", "POST /rest/com/vmware/cis/tagging/tag-association?action=list-attached-tags-on-objects", false},
		{"POST", "https://vc/rest/com/vmware/cis/session", "POST /rest/com/vmware/cis/session", true},
		{"POST", "https://vc/api/cis/tagging/tag-association/urn:x?action=attach", "POST /api/cis/tagging/tag-association?action=attach", true},
	} {
		r, err := http.NewRequest(tc.method, tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := vapiActionName(r); got != tc.action {
			t.Errorf("vapiActionName(%s %s) = %q, want %q", tc.method, tc.url, got, tc.action)
		}
		if got := vapiMutating(r); got != tc.write {
			t.Errorf("vapiMutating(%s %s) = %v, want %v", tc.method, tc.url, got, tc.write)
		}
	}
}

type soapFunc func(ctx context.Context, req, res soap.HasFault) error

func (f soapFunc) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	return f(ctx, req, res)
}

type statusErr string

func (s statusErr) Error() string { return string(s) }

// TestSOAPBudget: each call waits for its bucket and is counted by
// method and outcome; govmomi's error for a 503 answer is throttled.
func TestSOAPBudget(t *testing.T) {
	var answer error
	rt := &soapBudget{
		Next: soapFunc(func(ctx context.Context, _, _ soap.HasFault) error {
			if answer != nil { // as the HTTP transport under govmomi records it
				ctx.Value(retryAfterKey{}).(*retryAfterHint).set(http.StatusServiceUnavailable, "")
			}
			return answer
		}),
		Budget: cloudapi.NewBudget("vc-test", nil, map[string]cloudapi.RateLimit{cloudapi.APIVCenter: {QPS: 0.001, Bucket: 1, QPSWrite: 0.001, BucketWrite: 1}}),
	}
	ok := map[string]string{"backend": "vc-test", "api": cloudapi.APIVCenter, "action": "RetrievePropertiesEx", "outcome": cloudapi.OutcomeSuccess}
	before := testutil.CounterSum(t, "multicloud_ccm_cloud_api_calls_total", ok)
	if err := rt.RoundTrip(context.Background(), &methods.RetrievePropertiesExBody{}, &methods.RetrievePropertiesExBody{}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.CounterSum(t, "multicloud_ccm_cloud_api_calls_total", ok) - before; got != 1 {
		t.Errorf("calls_total{RetrievePropertiesEx,success} grew by %v, want 1", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := rt.RoundTrip(ctx, &methods.RetrievePropertiesExBody{}, &methods.RetrievePropertiesExBody{}); err == nil {
		t.Error("a second read went through a spent bucket of 1")
	}
	answer = &url.Error{Op: "POST", URL: "/sdk", Err: statusErr("503 Service Unavailable")}
	throttled := map[string]string{"backend": "vc-test", "api": cloudapi.APIVCenter}
	tb := testutil.CounterSum(t, "multicloud_ccm_cloud_api_throttled_total", throttled)
	if err := rt.RoundTrip(context.Background(), &methods.LoginBody{}, &methods.LoginBody{}); !errors.Is(err, answer) {
		t.Fatalf("the 503 = %v, want it returned as it came", err)
	}
	if got := testutil.CounterSum(t, "multicloud_ccm_cloud_api_throttled_total", throttled) - tb; got != 1 {
		t.Errorf("throttled_total grew by %v, want 1", got)
	}
}

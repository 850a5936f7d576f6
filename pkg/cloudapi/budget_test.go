package cloudapi

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestBudgetBuckets: a configured field overrides the default, the others
// keep it; a bucket spent makes Wait wait (here: fail at once, for the
// context's deadline is sooner than the next token), naming the backend
// and API; reads and writes have buckets of their own; a negative rate and
// an API without defaults are unlimited.
func TestBudgetBuckets(t *testing.T) {
	defaults := map[string]RateLimit{"elbv2": {QPS: 0.001, Bucket: 3, QPSWrite: 0.001, BucketWrite: 1}, "ec2": {QPS: 0.001, Bucket: 1, QPSWrite: 0.001, BucketWrite: 1}}
	b := NewBudget("aws-1", map[string]RateLimit{"elbv2": {Bucket: 2}, "ec2": {QPS: -1}}, defaults)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	for i := range 2 {
		if err := b.Wait(ctx, "elbv2", false); err != nil {
			t.Fatalf("read %d within the configured bucket of 2: %v", i, err)
		}
	}
	err := b.Wait(ctx, "elbv2", false)
	if err == nil || !strings.Contains(err.Error(), `elbv2 API budget of backend "aws-1"`) {
		t.Fatalf("3rd read = %v, want a wait past the deadline naming the budget", err)
	}
	if err := b.Wait(ctx, "elbv2", true); err != nil {
		t.Fatalf("a write after the reads ran out: %v", err)
	}
	if err := b.Wait(ctx, "elbv2", true); err == nil {
		t.Fatal("2nd write: the default write bucket of 1 let it through")
	}
	for i := range 50 {
		if err := b.Wait(ctx, "ec2", false); err != nil {
			t.Fatalf("ec2 read %d with qps -1 (unlimited): %v", i, err)
		}
		if err := b.Wait(ctx, "sts", true); err != nil {
			t.Fatalf("an API without a budget: %v", err)
		}
	}
	var nilBudget *Budget
	if err := nilBudget.Wait(ctx, "ec2", true); err != nil {
		t.Errorf("a nil budget: %v", err)
	}
}

// TestValidateLimits names an unknown API and the ones there are.
func TestValidateLimits(t *testing.T) {
	errs := ValidateLimits(map[string]RateLimit{"ec2": {}, "elb2": {QPS: 1}}, AWSDefaults, field.NewPath("aws", "rateLimits"))
	if len(errs) != 1 || !strings.Contains(errs.ToAggregate().Error(), `aws.rateLimits[elb2]: Unsupported value: "elb2": supported values: "ec2", "elbv2"`) {
		t.Errorf("errors = %v", errs)
	}
	if errs := ValidateLimits(map[string]RateLimit{"ec2": {QPS: 1, Bucket: -2}}, AWSDefaults, field.NewPath("aws", "rateLimits")); len(errs) != 1 {
		t.Errorf("a negative bucket: %v", errs)
	}
	for _, tc := range []struct {
		l    RateLimit
		want []string
	}{
		{RateLimit{QPS: Off, QPSWrite: Off}, nil},
		{RateLimit{QPS: 0.5, Bucket: 1, QPSWrite: 2, BucketWrite: 5}, nil},
		{RateLimit{QPS: -2}, []string{"aws.rateLimits[ec2].qps: Invalid value: -2: must be a positive rate (requests a second), 0 for the default, or -1 to turn the bucket off"}},
		{RateLimit{QPSWrite: -0.5, BucketWrite: -1}, []string{"aws.rateLimits[ec2].qpsWrite: Invalid value: -0.5", "aws.rateLimits[ec2].bucketWrite: Invalid value: -1: must be a positive number of requests, or 0 for the default"}},
		{RateLimit{QPS: Off, Bucket: -1}, []string{"aws.rateLimits[ec2].bucket: Invalid value: -1"}},
		{RateLimit{QPS: math.Inf(1)}, []string{"aws.rateLimits[ec2].qps: Invalid value: +Inf"}},
	} {
		errs := ValidateLimits(map[string]RateLimit{"ec2": tc.l}, AWSDefaults, field.NewPath("aws", "rateLimits"))
		if len(errs) != len(tc.want) {
			t.Errorf("%+v: errors %v, want %d", tc.l, errs, len(tc.want))
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(errs.ToAggregate().Error(), w) {
				t.Errorf("%+v: errors %v do not say %q", tc.l, errs, w)
			}
		}
	}
}

// TestBudgetWaitEndedByCaller: a wait the caller's context cancels is
// counted in budget_wait_seconds_total like any other (before, only waits
// that got their token were), and is an error wrapping context.Canceled;
// a wait that would pass the caller's deadline (refused at once) wraps
// context.DeadlineExceeded, so a cache can tell the caller's own end from
// the cloud's answer.
func TestBudgetWaitEndedByCaller(t *testing.T) {
	b := NewBudget("wait-ended", nil, map[string]RateLimit{"ec2": {QPS: 0.01, Bucket: 1, QPSWrite: 0.01, BucketWrite: 1}})
	if err := b.Wait(context.Background(), "ec2", false); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"backend": "wait-ended", "api": "ec2"}
	before := testutil.CounterSum(t, "multicloud_ccm_cloud_api_budget_wait_seconds_total", labels)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	err := b.Wait(ctx, "ec2", false)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a wait the caller cancelled = %v, want context.Canceled", err)
	}
	if got := testutil.CounterSum(t, "multicloud_ccm_cloud_api_budget_wait_seconds_total", labels) - before; got <= 0 {
		t.Errorf("budget_wait_seconds_total grew by %v for a wait cancelled after it began, want more than 0", got)
	}
	short, cancelShort := context.WithTimeout(context.Background(), time.Second)
	defer cancelShort()
	if err := b.Wait(short, "ec2", false); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrPastDeadline) || !strings.Contains(err.Error(), `ec2 API budget of backend "wait-ended"`) {
		t.Errorf("a wait past the caller's deadline = %v, want context.DeadlineExceeded naming the budget", err)
	}
}

// TestSharedBudget: budgets made with one key take their tokens from the
// same buckets (each counting under its own backend); another key has
// buckets of its own.
func TestSharedBudget(t *testing.T) {
	limits := map[string]RateLimit{"ec2": {QPS: 0.001, Bucket: 1, QPSWrite: 0.001, BucketWrite: 1}}
	a := NewSharedBudget("shared-a", "account-1|eu-west-1", nil, limits)
	b := NewSharedBudget("shared-b", "account-1|eu-west-1", nil, limits)
	c := NewSharedBudget("shared-c", "account-2|eu-west-1", nil, limits)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := a.Wait(ctx, "ec2", false); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(ctx, "ec2", false); !errors.Is(err, ErrPastDeadline) || !strings.Contains(err.Error(), `backend "shared-b"`) {
		t.Errorf("a read of a second backend of the account after the first spent the bucket = %v, want a wait past the deadline", err)
	}
	if err := c.Wait(ctx, "ec2", false); err != nil {
		t.Errorf("a read of another account: %v", err)
	}
	if a.Backend() != "shared-a" || b.Backend() != "shared-b" {
		t.Errorf("backends %q, %q", a.Backend(), b.Backend())
	}
}

// TestBudgetRetune: a budget turned off, then retuned in place to a bucket
// of 1, waits after one request; the other backend sharing its buckets
// waits with it; retuned off again, nothing waits. A budget made later
// with the new limits' key shares the retuned buckets, one with the old
// key does not.
func TestBudgetRetune(t *testing.T) {
	defaults := map[string]RateLimit{"elbv2": {QPS: 0.001, Bucket: 1, QPSWrite: 0.001, BucketWrite: 1}}
	off := map[string]RateLimit{"elbv2": {QPS: Off, QPSWrite: Off}}
	a := NewSharedBudget("retune-a", "retune|off", off, defaults)
	b := NewSharedBudget("retune-b", "retune|off", off, defaults)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	for i := range 5 {
		if err := a.Wait(ctx, "elbv2", true); err != nil {
			t.Fatalf("write %d with the budget off: %v", i, err)
		}
	}
	a.Retune("retune|on", nil, defaults)
	if err := a.Wait(ctx, "elbv2", true); err != nil {
		t.Fatalf("the first write after the retune (a full bucket of 1): %v", err)
	}
	if err := b.Wait(ctx, "elbv2", true); !errors.Is(err, ErrPastDeadline) {
		t.Errorf("a write of the backend sharing the retuned buckets = %v, want a wait past the deadline", err)
	}
	if c := NewSharedBudget("retune-c", "retune|on", nil, defaults); c.Wait(ctx, "elbv2", true) == nil {
		t.Error("a budget made with the retuned limits' key did not share the retuned (spent) buckets")
	}
	if d := NewSharedBudget("retune-d", "retune|off", off, defaults); d.Wait(ctx, "elbv2", true) != nil {
		t.Error("a budget made with the old key shares the retuned buckets")
	}
	a.Retune("retune|off", off, defaults)
	for i := range 5 {
		if err := b.Wait(ctx, "elbv2", true); err != nil {
			t.Fatalf("write %d retuned off: %v", i, err)
		}
	}
}

// TestRetuneJoinsTheKeysLiveBuckets: a reload that adds (or rebuilds) a
// backend of the account with new limits builds it first, under the new
// limits' key, and retunes the kept backend after: the retune joins the
// buckets the new one made, so the two take their tokens from one set, as
// two backends of one account started together do. Before, the kept one
// kept buckets of its own: together they had twice the account's bucket.
func TestRetuneJoinsTheKeysLiveBuckets(t *testing.T) {
	defaults := map[string]RateLimit{"ec2": {QPS: 0.001, Bucket: 5, QPSWrite: 0.001, BucketWrite: 5}}
	one := map[string]RateLimit{"ec2": {QPS: 0.001, Bucket: 1, QPSWrite: 0.001, BucketWrite: 1}}
	kept := NewSharedBudget("join-kept", "join|5", nil, defaults)
	added := NewSharedBudget("join-added", "join|1", one, defaults)
	kept.Retune("join|1", one, defaults)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := added.Wait(ctx, "ec2", false); err != nil {
		t.Fatal(err)
	}
	if err := kept.Wait(ctx, "ec2", false); !errors.Is(err, ErrPastDeadline) {
		t.Errorf("the retuned backend's read after the added one spent the account's one token = %v, want a wait past the deadline", err)
	}
	later := NewSharedBudget("join-later", "join|1", one, defaults)
	if err := later.Wait(ctx, "ec2", false); !errors.Is(err, ErrPastDeadline) {
		t.Errorf("a backend made later with the key: %v, want a wait past the deadline (the same buckets)", err)
	}
}

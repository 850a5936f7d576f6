package cloudapi

import (
	"context"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
)

// awsActions are actions the AWS backend sends, by API: reads and
// mutations of each.
var awsActions = map[string][]string{
	APIEC2:   {"DescribeInstances", "DescribeSecurityGroups", "DescribeSubnets", "CreateSecurityGroup", "AuthorizeSecurityGroupIngress", "RevokeSecurityGroupIngress"},
	APIELBv2: {"DescribeLoadBalancers", "DescribeTags", "DescribeTargetHealth", "CreateLoadBalancer", "CreateTargetGroup", "CreateListener", "RegisterTargets", "DeregisterTargets", "DeleteLoadBalancer"},
}

// TestAWSDefaultsAreAWSBuckets: the default budget has AWS's buckets, as
// the AWS fake models them from AWS's documentation: for every pair of
// actions, the two take their tokens from one bucket of the budget
// exactly when they take them from one bucket of AWS's, and each bucket
// has AWS's rate and AWS's size less the one token of margin. Before, the budget had one bucket for all of an
// API's mutations at half of a guess (ELBv2: 1 a second for every
// mutation together, where AWS lets each action's bucket refill at 2),
// and half of AWS's read buckets: creating 1,000 NLBs took about 65
// minutes on the budget alone.
func TestAWSDefaultsAreAWSBuckets(t *testing.T) {
	b := NewBudget("aws-defaults", nil, AWSDefaults)
	type seen struct {
		api, action string
		bk          *bucket
		key         string
	}
	var all []seen
	for api, actions := range awsActions {
		for _, action := range actions {
			key, want := awsfake.AWSRateLimits.BucketOf(api, action)
			bk := b.bucket(api, action, AWSMutating(action))
			if bk == nil {
				t.Fatalf("%s %s: no bucket", api, action)
			}
			if bk.ceiling != want.Refill || float64(bk.burst) != want.Capacity-awsMargin {
				t.Errorf("%s %s: bucket of %v a second, %d at once; AWS's (%s) is %v, %v (want its rate, and one token less)", api, action, bk.ceiling, bk.burst, key, want.Refill, want.Capacity)
			}
			all = append(all, seen{api, action, bk, key})
		}
	}
	for i, x := range all {
		for _, y := range all[i+1:] {
			if (x.bk == y.bk) != (x.key == y.key) {
				t.Errorf("%s %s and %s %s: one budget bucket %v, one AWS bucket %v", x.api, x.action, y.api, y.action, x.bk == y.bk, x.key == y.key)
			}
		}
	}
}

// TestPerActionBuckets: where an API keeps a bucket per action, a spent
// action's bucket makes only that action wait; a reconfigured rate
// applies to each action's bucket; -1 turns them all off; backends of one
// account share each action's bucket; the rate gauge shows the slowest
// action's bucket.
func TestPerActionBuckets(t *testing.T) {
	defaults := map[string]RateLimit{"x": {QPS: 0.001, Bucket: 1, QPSWrite: 0.001, BucketWrite: 2, PerActionReads: true, PerActionWrites: true}}
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	a := NewSharedBudget("per-action-a", "per-action-key", nil, defaults)
	other := NewSharedBudget("per-action-b", "per-action-key", nil, defaults)
	for i := range 2 {
		if err := a.WaitAction(short(), "x", "Create", true); err != nil {
			t.Fatalf("Create %d within its bucket of 2: %v", i, err)
		}
	}
	if err := other.WaitAction(short(), "x", "Create", true); err == nil {
		t.Error("the other backend of the account found Create's bucket full: the buckets are not shared")
	}
	if err := other.WaitAction(short(), "x", "Delete", true); err != nil {
		t.Errorf("Delete waited for Create's bucket: %v", err)
	}
	if err := a.WaitAction(short(), "x", "Describe", false); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAction(short(), "x", "Describe", false); err == nil {
		t.Error("a second Describe within a bucket of 1 did not wait")
	}
	if err := a.WaitAction(short(), "x", "List", false); err != nil {
		t.Errorf("List waited for Describe's bucket: %v", err)
	}

	configured := NewBudget("per-action-c", map[string]RateLimit{"x": {BucketWrite: 1}}, defaults)
	if err := configured.WaitAction(short(), "x", "Create", true); err != nil {
		t.Fatal(err)
	}
	if err := configured.WaitAction(short(), "x", "Create", true); err == nil {
		t.Error("bucketWrite 1 configured: a second Create did not wait")
	}
	if err := configured.WaitAction(short(), "x", "Delete", true); err != nil {
		t.Errorf("bucketWrite 1 is each action's: Delete waited: %v", err)
	}

	off := NewBudget("per-action-off", map[string]RateLimit{"x": {QPS: Off, QPSWrite: Off}}, defaults)
	for i := range 10 {
		if err := off.WaitAction(short(), "x", "Create", true); err != nil {
			t.Fatalf("write %d, the buckets off: %v", i, err)
		}
		if err := off.WaitAction(short(), "x", "Describe", false); err != nil {
			t.Fatalf("read %d, the buckets off: %v", i, err)
		}
	}
	if _, ok := off.api("x").rate(true); ok {
		t.Error("a rate for buckets turned off")
	}

	slowed := NewBudget("per-action-rate", map[string]RateLimit{"x": {QPSWrite: 8}}, defaults)
	slowed.Observe("x", "Create", true, OutcomeSuccess, 0)
	slowed.Observe("x", "Delete", true, OutcomeThrottled, 0)
	if r, _ := slowed.api("x").rate(true); r != 4 {
		t.Errorf("write rate %v after Delete was throttled, want the slowest bucket's 4", r)
	}
	if r := slowed.bucket("x", "Create", true).rate(); r != 8 {
		t.Errorf("Create's bucket slowed to %v by Delete's throttling", r)
	}
}

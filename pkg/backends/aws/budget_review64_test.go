package aws

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// Review probes (issue 42) of the API budget shared per account and region
// where it meets the live reload.

// review64Backend is one aws backend section for the fake at url, in vpc,
// with an ELBv2 read bucket of `bucket` tokens refilled once in 1,000 s
// (so a spent bucket stays spent for the test) and an instance cache TTL
// (ttl: a change of it rebuilds the backend, and nothing of the budget),
// its access key read from keyEnv: the budget's account (budgetKey), one
// per subtest, as shared buckets are the process's.
func review64Backend(keyEnv, name, url, vpc string, bucket int, ttl string) string {
	return fmt.Sprintf(`- name: %[1]s
  type: aws
  aws:
    region: %[2]s
    vpc: %[3]s
    endpoints: {ec2: %[4]q, elbv2: %[4]q, sts: %[4]q}
    credentials:
      accessKeyID: {env: %[7]s}
      secretAccessKey: {env: TEST_AWS_SECRET}
    retry: {maxAttempts: 6, maxBackoff: 5ms}
    instanceCacheTTL: %[6]s
    rateLimits: {elbv2: {qps: 0.001, bucket: %[5]d}}
`, name, testRegion, vpc, url, bucket, ttl, keyEnv)
}

func review64Config(t *testing.T, sections ...string) *config.CloudConfig {
	t.Helper()
	raw := "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: " + testCluster +
		"\nloadBalancer: {defaultBackend: aws-1}\nbackends:\n"
	for _, s := range sections {
		raw += s
	}
	cfg, err := config.Parse([]byte(raw), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// review64Read makes one ELBv2 read through the named backend of rl and
// returns its error: a spent bucket (refilled in 1,000 s) is refused at
// once for the read's deadline (cloudapi.ErrPastDeadline).
func review64Read(rl *router.Reloadable, name string) error {
	c := rl.Current().ByName[name].Cloud.(*Cloud) //nolint:forcetypeassert // an aws backend.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.lb.elb.DescribeLoadBalancers(ctx, nil)
	return err
}

// TestReview64SharedBudgetAfterRetuneAndNewSharer: two aws backends of one
// account and region (same credentials, region and endpoints; two VPCs)
// must take their tokens from one set of buckets, however the config got
// there (docs/aws.md, "Two backends of one account and region share one
// budget"). Started with both, they do (the control). Reached by a live
// reload that changes aws-1's rateLimits (a retune, in place) and adds
// aws-2 (or rebuilds it) with the same new rateLimits, they must too: an
// operator who adds a second VPC's backend and lowers the shared budget in
// the same edit expects the two to stay within one account's bucket.
func TestReview64SharedBudgetAfterRetuneAndNewSharer(t *testing.T) {
	e := newEnv(t)
	e.fake.AddVPC("vpc-0b2", "10.1.0.0/16")
	ctx := context.Background()
	for _, k := range []string{"KEY_A", "KEY_B", "KEY_C", "KEY_D"} {
		t.Setenv(k, "AKIDREVIEW64")
	}
	t.Setenv("TEST_AWS_SECRET", "fake-secret")

	// Spent by one backend, the bucket is spent for the other.
	shared := func(t *testing.T, rl *router.Reloadable, what string) {
		t.Helper()
		if err := review64Read(rl, "aws-1"); err != nil {
			t.Fatalf("%s: aws-1's first read: %v", what, err)
		}
		if err := review64Read(rl, "aws-2"); !errors.Is(err, cloudapi.ErrPastDeadline) {
			t.Errorf("%s: aws-2's read after aws-1 spent the account's one token = %v, want refused for its deadline (one budget for the account)", what, err)
		}
	}

	t.Run("control: both from the start", func(t *testing.T) {
		rl, err := router.NewReloadable(ctx, review64Config(t,
			review64Backend("KEY_A", "aws-1", e.url, testVPC, 1, "1m"), review64Backend("KEY_A", "aws-2", e.url, "vpc-0b2", 1, "1m")))
		if err != nil {
			t.Fatal(err)
		}
		shared(t, rl, "config with both")
	})

	t.Run("retune aws-1 and add aws-2", func(t *testing.T) {
		rl, err := router.NewReloadable(ctx, review64Config(t, review64Backend("KEY_B", "aws-1", e.url, testVPC, 5, "1m")))
		if err != nil {
			t.Fatal(err)
		}
		ch, err := rl.Apply(ctx, review64Config(t,
			review64Backend("KEY_B", "aws-1", e.url, testVPC, 1, "1m"), review64Backend("KEY_B", "aws-2", e.url, "vpc-0b2", 1, "1m")))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("changes: retuned %v added %v rebuilt %v", ch.Retuned, ch.Added, ch.Rebuilt)
		shared(t, rl, "after the reload")
	})

	t.Run("retune aws-1 and rebuild aws-2", func(t *testing.T) {
		rl, err := router.NewReloadable(ctx, review64Config(t,
			review64Backend("KEY_C", "aws-1", e.url, testVPC, 5, "1m"), review64Backend("KEY_C", "aws-2", e.url, "vpc-0b2", 5, "1m")))
		if err != nil {
			t.Fatal(err)
		}
		ch, err := rl.Apply(ctx, review64Config(t,
			review64Backend("KEY_C", "aws-1", e.url, testVPC, 1, "1m"), review64Backend("KEY_C", "aws-2", e.url, "vpc-0b2", 1, "2m")))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("changes: retuned %v added %v rebuilt %v", ch.Retuned, ch.Added, ch.Rebuilt)
		shared(t, rl, "after the reload")
	})

	// One of the two removed by a reload: the other keeps the account's
	// buckets as they are (AWS's bucket is no fuller for the removal).
	t.Run("aws-2 removed", func(t *testing.T) {
		rl, err := router.NewReloadable(ctx, review64Config(t,
			review64Backend("KEY_D", "aws-1", e.url, testVPC, 1, "1m"), review64Backend("KEY_D", "aws-2", e.url, "vpc-0b2", 1, "1m")))
		if err != nil {
			t.Fatal(err)
		}
		if err := review64Read(rl, "aws-2"); err != nil {
			t.Fatalf("aws-2's first read: %v", err)
		}
		ch, err := rl.Apply(ctx, review64Config(t, review64Backend("KEY_D", "aws-1", e.url, testVPC, 1, "1m")))
		if err != nil {
			t.Fatal(err)
		}
		if len(ch.Removed) != 1 || len(ch.Retuned)+len(ch.Rebuilt) != 0 {
			t.Fatalf("changes %+v, want aws-2 removed and aws-1 kept", ch)
		}
		if err := review64Read(rl, "aws-1"); !errors.Is(err, cloudapi.ErrPastDeadline) {
			t.Errorf("aws-1's read after aws-2 spent the account's token and was removed = %v, want refused for its deadline", err)
		}
	})
}

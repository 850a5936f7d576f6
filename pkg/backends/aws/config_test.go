package aws

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

func TestParseSectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      []string // every one must appear in the error list.
	}{
		{"empty", `{}`, []string{"aws.region", "aws.vpc"}},
		{"everything wrong at once", `{"region": "Ireland", "vpc": "vpc1", "subnets": ["sn-1"], "profile": "p",
			"credentials": {"accessKeyID": {"env": "X"}, "secretAccessKey": {"file": "/nonexistent/secret"}},
			"assumeRole": {"roleARN": "ccm"}, "endpoints": {"ec2": "ec2.local", "elbv2": "ftp://x", "sts": "https://"},
			"routes": {"routeTableID": "table-1"}, "instanceCacheTTL": "-1s", "retry": {"maxAttempts": -1, "maxBackoff": "-2s"}}`,
			[]string{"aws.region", "aws.vpc", "aws.subnets[0]", "aws.profile", "aws.assumeRole.roleARN", "aws.endpoints.ec2",
				"aws.endpoints.elbv2", "aws.endpoints.sts", "aws.routes.routeTableID", "aws.instanceCacheTTL", "aws.retry.maxAttempts", "aws.retry.maxBackoff"}},
		{"unknown field", `{"region": "eu-west-1", "vpc": "vpc-0a1", "subnet": "subnet-0a"}`, []string{"subnet"}},
		{"bad rate limits", `{"region": "eu-west-1", "vpc": "vpc-0a1", "rateLimits": {"elb": {}, "ec2": {"qps": -2, "bucket": -1, "qpsWrite": -0.5, "bucketWrite": -3}}}`,
			[]string{`aws.rateLimits[elb]: Unsupported value: "elb": supported values: "ec2", "elbv2"`,
				"aws.rateLimits[ec2].qps: Invalid value: -2: must be a positive rate (requests a second), 0 for the default, or -1 to turn the bucket off",
				"aws.rateLimits[ec2].bucket: Invalid value: -1", "aws.rateLimits[ec2].qpsWrite: Invalid value: -0.5", "aws.rateLimits[ec2].bucketWrite: Invalid value: -3"}},
		{"rate limit of the wrong type", `{"region": "eu-west-1", "vpc": "vpc-0a1", "rateLimits": {"ec2": {"qps": "fast"}}}`, []string{"qps"}},
		{"inline secret", `{"region": "eu-west-1", "vpc": "vpc-0a1", "credentials": {"accessKeyID": "AKID", "secretAccessKey": {"env": "S"}}}`,
			[]string{"aws.credentials.accessKeyID"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, errs := ParseSection([]byte(tc.raw), field.NewPath("aws"), t.TempDir())
			if s != nil || len(errs) == 0 {
				t.Fatalf("ParseSection = %v, %v; want errors", s, errs)
			}
			msg := errs.ToAggregate().Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("errors %q do not name %s", msg, w)
				}
			}
		})
	}
}

func TestParseSectionDefaults(t *testing.T) {
	s, errs := ParseSection([]byte(`{"region": "eu-west-1", "vpc": "vpc-0a1", "assumeRole": {"roleARN": "arn:aws:iam::123456789012:role/ccm"}}`), field.NewPath("aws"), "")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := s.(*Settings)
	if got.InstanceCacheTTL.Duration != defaultInstanceCacheTTL || got.Retry.MaxAttempts != defaultMaxAttempts ||
		got.Retry.MaxBackoff.Duration != defaultMaxBackoff || got.AssumeRole.SessionName != "multicloud-ccm" || got.UseInstanceMetadata || got.Routes != nil {
		t.Errorf("defaults = %+v", got)
	}
}

// isolateCredentials hides every credential source of the test machine
// from the SDK's default chain.
func isolateCredentials(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_SESSION_NAME", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_EC2_METADATA_DISABLED", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
}

// cloudFromJSON builds a backend from extra JSON fields of the aws
// section, against the fake at url.
func cloudFromJSON(t *testing.T, url, extra string) *Cloud {
	t.Helper()
	raw := fmt.Sprintf(`{"region": %q, "vpc": %q, "endpoints": {"ec2": %q, "elbv2": %q, "sts": %q}, "retry": {"maxAttempts": 2, "maxBackoff": "5ms"}%s}`,
		testRegion, testVPC, url, url, url, extra)
	s, errs := ParseSection([]byte(raw), field.NewPath("aws"), t.TempDir())
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	c, err := New(context.Background(), backends.Options{Name: "aws-1", ClusterID: testCluster, Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	return c.(*Cloud)
}

// describe makes one DescribeInstances call through the backend.
func describe(c *Cloud) error {
	_, err := c.instances.InstanceExists(context.Background(), newNode("n", testutil.WithProviderID("aws:///eu-west-1a/"+instanceID(1))))
	return err
}

// TestCredentials: the SDK's default chain (environment, web identity
// through the STS override) and an assumed role sign the calls; without
// useInstanceMetadata the instance metadata service is never contacted.
func TestCredentials(t *testing.T) {
	t.Run("environment", func(t *testing.T) {
		isolateCredentials(t)
		e := newEnv(t)
		e.addInstance(1)
		t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
		if err := describe(cloudFromJSON(t, e.url, "")); err != nil {
			t.Fatal(err)
		}
		if k := e.fake.LastAccessKey("DescribeInstances"); k != "AKIDFROMENV" {
			t.Errorf("signed with %q", k)
		}
	})
	t.Run("assume role", func(t *testing.T) {
		isolateCredentials(t)
		e := newEnv(t)
		e.addInstance(1)
		t.Setenv("AWS_ACCESS_KEY_ID", "AKIDSOURCE")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
		c := cloudFromJSON(t, e.url, `, "assumeRole": {"roleARN": "arn:aws:iam::123456789012:role/ccm", "externalID": "x"}`)
		if err := describe(c); err != nil {
			t.Fatal(err)
		}
		if k := e.fake.LastAccessKey("AssumeRole"); k != "AKIDSOURCE" {
			t.Errorf("AssumeRole signed with %q", k)
		}
		if k := e.fake.LastAccessKey("DescribeInstances"); k != "ASIAFAKE" {
			t.Errorf("DescribeInstances signed with %q, want the role's ASIAFAKE", k)
		}
	})
	t.Run("web identity through the STS override", func(t *testing.T) {
		isolateCredentials(t)
		e := newEnv(t)
		e.addInstance(1)
		token := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(token, []byte("eyJ.fake.jwt"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", token)
		t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/irsa")
		if err := describe(cloudFromJSON(t, e.url, "")); err != nil {
			t.Fatal(err)
		}
		if n := e.fake.Calls("AssumeRoleWithWebIdentity"); n != 1 {
			t.Errorf("AssumeRoleWithWebIdentity calls = %d", n)
		}
		if k := e.fake.LastAccessKey("DescribeInstances"); k != "ASIAWEBIDENTITY" {
			t.Errorf("DescribeInstances signed with %q", k)
		}
	})
	t.Run("instance metadata only when asked for", func(t *testing.T) {
		var hits atomic.Int32
		imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			http.NotFound(w, r)
		}))
		t.Cleanup(imds.Close)
		isolateCredentials(t)
		t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
		e := newEnv(t)
		e.addInstance(1)
		if err := describe(cloudFromJSON(t, e.url, "")); err == nil {
			t.Fatal("a call without credentials succeeded")
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("the instance metadata service got %d requests without useInstanceMetadata", n)
		}
		if e.fake.TotalCalls() != 0 {
			t.Errorf("unsigned calls reached AWS: %v", e.fake.CallCounts())
		}
		if err := describe(cloudFromJSON(t, e.url, `, "useInstanceMetadata": true`)); err == nil {
			t.Fatal("a call without credentials succeeded")
		}
		if hits.Load() == 0 {
			t.Error("useInstanceMetadata: the instance metadata service was not asked for credentials")
		}
	})
}

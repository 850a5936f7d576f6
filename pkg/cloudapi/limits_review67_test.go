package cloudapi

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi/limits"
)

// TestReview67LimitsAsBeforeTheMove: ValidateLimits and WithDefaults,
// reached through cloudapi's aliases (as the aws and openstack backends
// reach them), answer what cloudapi's own code answered before RateLimit
// moved to package limits (fe748e8, pkg/cloudapi/budget.go).
func TestReview67LimitsAsBeforeTheMove(t *testing.T) {
	defs := map[string]RateLimit{"vcenter": {QPS: 10}, "ec2": {QPS: 20}}
	path := field.NewPath("backends").Index(0).Child("vsphere").Child("rateLimits")
	tests := []struct {
		in   map[string]RateLimit
		want string
	}{
		{map[string]RateLimit{"vcenter": {QPS: -2, Bucket: -1, QPSWrite: math.NaN(), BucketWrite: -5, Mode: "weird"}},
			`[backends[0].vsphere.rateLimits[vcenter].qps: Invalid value: -2: must be a positive rate (requests a second), 0 for the default, or -1 to turn the bucket off, backends[0].vsphere.rateLimits[vcenter].qpsWrite: Invalid value: NaN: must be a positive rate (requests a second), 0 for the default, or -1 to turn the bucket off, backends[0].vsphere.rateLimits[vcenter].bucket: Invalid value: -1: must be a positive number of requests, or 0 for the default, backends[0].vsphere.rateLimits[vcenter].bucketWrite: Invalid value: -5: must be a positive number of requests, or 0 for the default, backends[0].vsphere.rateLimits[vcenter].mode: Unsupported value: "weird": supported values: "adaptive", "fixed"]`},
		{map[string]RateLimit{"elbv2": {}, "vcenter": {QPS: math.Inf(1)}},
			`[backends[0].vsphere.rateLimits[elbv2]: Unsupported value: "elbv2": supported values: "ec2", "vcenter", backends[0].vsphere.rateLimits[vcenter].qps: Invalid value: +Inf: must be a positive rate (requests a second), 0 for the default, or -1 to turn the bucket off]`},
		{map[string]RateLimit{"vcenter": {QPS: Off, QPSWrite: Off, Mode: ModeFixed}}, `<nil>`},
		{map[string]RateLimit{"vcenter": {QPS: -0.5, Mode: "Adaptive"}},
			`[backends[0].vsphere.rateLimits[vcenter].qps: Invalid value: -0.5: must be a positive rate (requests a second), 0 for the default, or -1 to turn the bucket off, backends[0].vsphere.rateLimits[vcenter].mode: Unsupported value: "Adaptive": supported values: "adaptive", "fixed"]`},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(ValidateLimits(tt.in, defs, path).ToAggregate()); got != tt.want {
			t.Errorf("ValidateLimits(%v):\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
	got := RateLimit{QPS: 3}.WithDefaults(RateLimit{QPS: 9, Bucket: 4, QPSWrite: 2, BucketWrite: 7, PerActionReads: true})
	if want := (RateLimit{QPS: 3, Bucket: 4, QPSWrite: 2, BucketWrite: 7, Mode: ModeAdaptive, PerActionReads: true}); got != want {
		t.Errorf("WithDefaults = %+v, want %+v", got, want)
	}
	if reflect.ValueOf(VCenterDefaults).Pointer() != reflect.ValueOf(limits.VCenterDefaults).Pointer() {
		t.Error("cloudapi.VCenterDefaults is not limits.VCenterDefaults: the budget and the section's validation read different defaults")
	}
}

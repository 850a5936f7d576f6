package openstack

import (
	"strings"
	"testing"
)

// TestRateLimitsSettings: rateLimits names OpenStack's services; another
// key is refused naming the field and the services there are.
func TestRateLimitsSettings(t *testing.T) {
	t.Setenv("P", "x")
	base := "auth: {authURL: 'https://keystone.example.com/v3', username: ccm, password: {env: P}, projectName: k8s}\nregion: RegionOne\nloadBalancer: {enabled: false}\nrateLimits: %s\n"
	if _, errs := parseSection(yamlJSON(t, strings.Replace(base, "%s", "{load-balancer: {qps: 5}, compute: {qpsWrite: 1, bucketWrite: 2}}", 1)), nil, t.TempDir()); len(errs) > 0 {
		t.Fatalf("valid rateLimits refused: %v", errs.ToAggregate())
	}
	_, errs := parseSection(yamlJSON(t, strings.Replace(base, "%s", "{octavia: {qps: 5}}", 1)), nil, t.TempDir())
	if err := errs.ToAggregate(); err == nil || !strings.Contains(err.Error(), `rateLimits[octavia]: Unsupported value: "octavia": supported values: "compute", "key-manager", "load-balancer", "network"`) {
		t.Errorf("rateLimits naming no service: %v", err)
	}
}

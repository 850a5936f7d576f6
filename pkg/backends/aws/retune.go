package aws

import (
	"context"
	"fmt"
	"reflect"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// PrepareRetune takes a live reload that changes only rateLimits in place
// (router.Retuner): the backend keeps its clients, caches and what it last
// verified of each NLB (the verified views a node sync writes from), and
// its budget takes the new limits at once (cloudapi.Budget.Retune). Any
// other change, the cluster ID's included, is not a retune: the router
// rebuilds the backend. A backend without a budget of its own (a test's
// clients) is never retuned.
func (c *Cloud) PrepareRetune(_ context.Context, o backends.Options) (func(), bool, error) {
	s, ok := o.Settings.(*Settings)
	if !ok || s == nil {
		return nil, false, fmt.Errorf("settings are %T, want *aws.Settings", o.Settings)
	}
	if c.budget == nil || o.ClusterID != c.clusterID || o.Name != c.name {
		return nil, false, nil
	}
	was, now := *c.settings, *s
	was.RateLimits, now.RateLimits = nil, nil
	if !reflect.DeepEqual(was, now) {
		return nil, false, nil
	}
	return func() {
		c.budget.Retune(sharedBudgetKey(s), s.RateLimits, cloudapi.AWSDefaults)
	}, true, nil
}

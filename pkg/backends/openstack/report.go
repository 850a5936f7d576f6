package openstack

import (
	"context"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// reportChange tells the caller what a successful mutating call changed
// on an existing load balancer (backends.ReportChange), unless this
// process is still building that load balancer from nothing.
func (l *LoadBalancer) reportChange(ctx context.Context, lbID, what string) {
	if _, building := l.building.Load(lbID); building {
		return
	}
	backends.ReportChange(ctx, what)
}

// mutating is called before a mutating call on an existing load balancer:
// repair passes under way read it from the cloud from then on.
func (l *LoadBalancer) mutating(lbID string) { l.dropFromPasses(lbID) }

// dryRun records, under a dry run (backends.WithDryRun), the mutating call
// the backend was about to make, and reports true: the caller does not
// make it and goes on as if it had been made. Outside a dry run it reports
// false. call names the request ("octavia: PUT load balancer tags").
func dryRun(ctx context.Context, kind backends.IntentKind, call, what string) bool {
	if !backends.DryRun(ctx) {
		return false
	}
	backends.RecordIntentOf(ctx, kind, "openstack: "+call, what)
	return true
}

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

package router

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// PrepareLoadBalancer is the current configuration's.
func (rl *Reloadable) PrepareLoadBalancer(service *corev1.Service) map[string]*string {
	return rl.Current().PrepareLoadBalancer(service)
}

// BeginRepairPass starts a drift-repair pass: each backend that can read
// its load balancers in bulk (backends.RepairPasser) does so once, and the
// returned context carries their snapshots to the EnsureLoadBalancer calls
// of the pass. end releases them. A backend whose bulk read fails is read
// per Service, as without a pass.
func (r *Router) BeginRepairPass(ctx context.Context, clusterName string) (context.Context, func()) {
	var ends []func()
	for _, b := range r.lbs {
		rp, ok := b.Cloud.(backends.RepairPasser)
		if !ok {
			continue
		}
		pctx, end, err := rp.BeginRepairPass(ctx, clusterName)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Reading the load balancers in bulk for a drift-repair pass failed; reading them one by one", "backend", b.Name)
			continue
		}
		ctx = pctx
		ends = append(ends, end)
	}
	return ctx, func() {
		for _, end := range ends {
			end()
		}
	}
}

// BeginRepairPass is the current configuration's.
func (rl *Reloadable) BeginRepairPass(ctx context.Context, clusterName string) (context.Context, func()) {
	return rl.Current().BeginRepairPass(ctx, clusterName)
}

// SetServiceSync is for a controller that syncs Services itself
// (pkg/lbcontroller): when a drain ends, the drain timer calls sync with
// the Service, and, if it returns true (the controller serves the Service
// and queued it for a full sync), leaves the drain's end to that sync
// instead of the router's own (under upstream's service controller, the
// re-sync's full sync). It lives for the process.
func (r *Router) SetServiceSync(sync func(*corev1.Service) bool) { r.st.ServiceSync.Store(&sync) }

// SetServiceSync is the process's (see Router.SetServiceSync).
func (rl *Reloadable) SetServiceSync(sync func(*corev1.Service) bool) {
	rl.st.ServiceSync.Store(&sync)
}

// SetServed is for a controller that syncs Services itself
// (pkg/lbcontroller): served reports, changing nothing, whether it serves
// a LoadBalancer Service. A reload that changes which nodes the load
// balancers target leaves those Services to that controller's node sync
// and re-targets the others, upstream's service controller's, itself
// (lifecycle.Retarget). It lives for the process.
func (r *Router) SetServed(served func(*corev1.Service) bool) { r.st.Served.Store(&served) }

// SetServed is the process's (see Router.SetServed).
func (rl *Reloadable) SetServed(served func(*corev1.Service) bool) { rl.st.Served.Store(&served) }

// WithRecordOf returns svc with every backend the record of other
// (multicloud-ccm.io/load-balancer-backends, see lifecycle's record.go)
// names added to its own record: for a controller that deletes, once the
// Service is gone (ServiceGone), with one copy of it (the version its
// last ensure was handed) while another (the version it served before)
// names backends that copy's record does not. The delete must reach every
// backend either record names, or what one left there stays for good:
// nobody can read the record of a Service that is gone. svc is returned
// as is when it names them all already; it is never changed in place.
func WithRecordOf(svc, other *corev1.Service) *corev1.Service {
	have, add := svcstate.ParseRecord(svc), svcstate.ParseRecord(other)
	merged := have.With(add.Names...)
	if len(add.Names) == 0 || have.Known && len(merged.Names) == len(have.Names) {
		return svc
	}
	out := svc.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[string(annotation.LoadBalancerBackends)] = merged.Value()
	return out
}

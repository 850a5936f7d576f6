package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Event reasons for Service problems. They are stable.
const (
	reasonUnknownLBBackend = "UnknownLoadBalancerBackend"
	reasonCleanupPending   = "LoadBalancerCleanupPending"
)

// lbTarget returns the backend that should hold service's load balancer:
// its class's backend (see classTarget), else the annotation's, else the
// default, else nil (implemented elsewhere).
func (r *Router) lbTarget(service *corev1.Service) (*backend, error) {
	if b, handled, err := r.classTarget(service); handled {
		return b, err
	}
	name, annotated := service.Annotations[string(annotation.LoadBalancerBackend)]
	if !annotated {
		name = r.cfg.LoadBalancer.DefaultBackend
	}
	if name == "" && !annotated {
		return nil, nil
	}
	b, ok := r.byName[name]
	if !ok || b.lb == nil {
		return nil, fmt.Errorf("service %s/%s: annotation %s=%q names no backend with load balancers; use one of %v, or remove the annotation to use the default",
			service.Namespace, service.Name, annotation.LoadBalancerBackend, name, names(r.lbs))
	}
	return b, nil
}

// GetLoadBalancer asks the backends that may hold the Service's load
// balancer (see mayHold): it exists if any of them holds any part of it, so
// a delete is never skipped while something is left, and a backend that
// never held it is not asked, so its outage blocks nothing. The status is
// the target backend's if it has one.
func (r *Router) GetLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	service = r.withClassDefaults(service)
	target, _ := r.lbTarget(service)
	asked, err := r.mayHold(service, target)
	if err != nil {
		r.recordServiceError(ctx, service, err)
		return nil, false, err
	}
	found, err := r.holders(ctx, clusterName, service, asked)
	if err != nil || len(found) == 0 {
		r.recordServiceError(ctx, service, err)
		return nil, false, err
	}
	for _, h := range found {
		if h.b == target {
			return h.status, true, nil
		}
	}
	return found[0].status, true, nil
}

// GetLoadBalancerName returns the target backend's name for the load
// balancer, or the upstream default name.
func (r *Router) GetLoadBalancerName(ctx context.Context, clusterName string, service *corev1.Service) string {
	service = r.withClassDefaults(service)
	if b, err := r.lbTarget(service); err == nil && b != nil {
		return b.lb.GetLoadBalancerName(ctx, clusterName, service)
	}
	return cloudprovider.DefaultLoadBalancerName(service)
}

// EnsureLoadBalancer records the target backend on the Service, creates or
// updates the load balancer there, handing it only the nodes it can target,
// then removes it from every other backend that may still hold one (the
// annotation may have moved it), and writes on the Service the backend
// serving it and the load-balancer ID that backend reported (markServed).
// A Service no backend serves gets
// ImplementedElsewhere, after any load balancer we made for it earlier is
// removed and its address cleared from the Service's status.
func (r *Router) EnsureLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	service = r.withClassDefaults(service)
	defer r.lockService(service)()
	r.st.clusterName.Store(clusterName)
	target, err := r.lbTarget(service)
	if err != nil {
		reason := reasonUnknownLBBackend
		if ue, ok := backends.AsUserError(err); ok {
			reason = ue.Reason
		}
		r.warn(ctx, serviceRef(service), reason, err.Error())
		return nil, err
	}
	if target == nil {
		if err := r.evict(ctx, clusterName, service, nil); err != nil {
			return nil, err
		}
		return nil, cloudprovider.ImplementedElsewhere
	}
	if r.wasDeleted(service.UID) {
		return nil, fmt.Errorf("service %s/%s: its load balancer was deleted with the Service; not creating it again", service.Namespace, service.Name)
	}
	if err := r.addToRecord(ctx, service, target); err != nil {
		return nil, err
	}
	idCtx, reportedID := backends.WithLoadBalancerIDReport(ctx)
	status, err := target.ensureLoadBalancer(idCtx, clusterName, service, target.targetable(service, nodes))
	if err != nil {
		r.recordServiceError(ctx, service, err)
		return nil, err
	}
	if err := r.evict(ctx, clusterName, service, target); err != nil {
		return nil, err
	}
	if err := r.markServed(ctx, service, target, reportedID(), backends.ReportedServiceAnnotations(idCtx)); err != nil {
		return nil, err
	}
	r.requeueIfStale(ctx, service, target, nodes)
	return status, nil
}

// UpdateLoadBalancer hands the backend holding the Service's load balancer
// its targetable nodes: the target backend, or, while a reload or an
// annotation change has moved the Service's target but no EnsureLoadBalancer
// has moved the load balancer yet, the backend still serving it (see
// updateTarget), so node changes reach the load balancer that exists.
func (r *Router) UpdateLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) error {
	service = r.withClassDefaults(service)
	defer r.lockService(service)()
	r.st.clusterName.Store(clusterName)
	target, moving, err := r.updateTarget(service)
	if err != nil {
		return err
	}
	if target == nil {
		return cloudprovider.ImplementedElsewhere
	}
	if moving {
		r.st.queueResync(service)
	} else if err := r.addToRecord(ctx, service, target); err != nil {
		return err
	}
	err = target.updateLoadBalancer(ctx, clusterName, service, target.targetable(service, nodes))
	if err != nil {
		r.recordServiceError(ctx, service, err)
		return err
	}
	r.requeueIfStale(ctx, service, target, nodes)
	return nil
}

// updateTarget returns the backend an update of the Service's load
// balancer goes to: the backend serving it (multicloud-ccm.io/load-balancer-served-by,
// recorded) when that is not yet its target (moving), else its target.
func (r *Router) updateTarget(service *corev1.Service) (b *backend, moving bool, err error) {
	target, err := r.lbTarget(service)
	if err != nil || target == nil {
		return target, false, err
	}
	served, ok := r.byName[service.Annotations[string(annotation.LoadBalancerServedBy)]]
	if ok && served.lb != nil && served != target && r.recordOf(service).has(served.Name) {
		return served, true, nil
	}
	return target, false, nil
}

// EnsureLoadBalancerDeleted deletes the Service's load balancer from every
// backend that may hold one; each backend's delete is idempotent, and each
// that succeeded leaves the record. It fails, keeping the Service's
// finalizer, until every one of them succeeded.
func (r *Router) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *corev1.Service) error {
	service = r.withClassDefaults(service)
	defer r.lockService(service)()
	target, _ := r.lbTarget(service)
	asked, err := r.mayHold(service, target)
	if err != nil {
		r.recordServiceError(ctx, service, err)
		return err
	}
	var (
		mu   sync.Mutex
		done []string
	)
	err = ask(ctx, asked, func(ctx context.Context, b *backend) (struct{}, error) {
		return struct{}{}, b.ensureLoadBalancerDeleted(ctx, clusterName, service)
	}, func(b *backend, _ struct{}) {
		mu.Lock()
		defer mu.Unlock()
		done = append(done, b.Name)
	})
	err = errors.Join(err, r.dropFromRecord(ctx, service, done))
	if err == nil {
		r.markDeleted(service)
	}
	r.recordServiceError(ctx, service, err)
	return err
}

// evict removes the Service's load balancer from every backend that may
// hold one except keep (nil: from all of them), and drops them from the
// record. When no backend is kept, the Service's status is cleared of the
// released addresses first.
func (r *Router) evict(ctx context.Context, clusterName string, service *corev1.Service, keep *backend) error {
	asked, err := r.mayHold(service, keep)
	if err == nil {
		asked = slices.DeleteFunc(slices.Clone(asked), func(b *backend) bool { return b == keep })
		err = r.release(ctx, clusterName, service, asked, keep == nil)
	}
	if err != nil {
		r.recordServiceError(ctx, service, err)
		msg := fmt.Sprintf("Cannot yet remove the load balancer from the backends the Service no longer uses: %v", err)
		r.warn(ctx, serviceRef(service), reasonCleanupPending, msg)
		return fmt.Errorf("service %s/%s: %w", service.Namespace, service.Name, err)
	}
	return nil
}

// release deletes the Service's load balancer from the holders among asked
// (clearing their addresses from its status first when clear is set), then
// drops every asked backend from the record.
func (r *Router) release(ctx context.Context, clusterName string, service *corev1.Service, asked []*backend, clear bool) error {
	if len(asked) == 0 {
		return nil
	}
	found, err := r.holders(ctx, clusterName, service, asked)
	if err != nil {
		return err
	}
	if clear && len(found) > 0 {
		if err := r.clearStatus(ctx, service, found); err != nil {
			return fmt.Errorf("clearing the released address from the Service's status: %w", err)
		}
	}
	if err := r.deleteFrom(ctx, clusterName, service, found); err != nil {
		return err
	}
	return r.dropFromRecord(ctx, service, names(asked))
}

func (r *Router) deleteFrom(ctx context.Context, clusterName string, service *corev1.Service, found []holder) error {
	var errs []error
	for _, h := range found {
		errs = append(errs, h.b.ensureLoadBalancerDeleted(ctx, clusterName, service))
	}
	return errors.Join(errs...)
}

// holder is a backend that reported a load balancer for a Service.
type holder struct {
	b      *backend
	status *corev1.LoadBalancerStatus
}

// holders asks the backends in asked, concurrently, whether they hold a
// load balancer for service. Any of them failing to answer is an error.
func (r *Router) holders(ctx context.Context, clusterName string, service *corev1.Service, asked []*backend) ([]holder, error) {
	var found []holder
	err := ask(ctx, asked, func(ctx context.Context, b *backend) (holder, error) {
		status, exists, err := b.getLoadBalancer(ctx, clusterName, service)
		if !exists {
			return holder{}, err
		}
		return holder{b: b, status: status}, err
	}, func(_ *backend, h holder) {
		if h.b != nil {
			found = append(found, h)
		}
	})
	if err != nil {
		return nil, err
	}
	return orderHolders(r.lbs, found), nil
}

// orderHolders sorts found into config order, so answers are stable.
func orderHolders(order []*backend, found []holder) []holder {
	out := make([]holder, 0, len(found))
	for _, b := range order {
		for _, h := range found {
			if h.b == b {
				out = append(out, h)
			}
		}
	}
	return out
}

// recordServiceError puts a Warning event with the backend's reason on the
// Service for every error a user can fix.
func (r *Router) recordServiceError(ctx context.Context, service *corev1.Service, err error) {
	if ue, ok := backends.AsUserError(err); ok {
		r.warn(ctx, serviceRef(service), ue.Reason, err.Error())
	}
}

// targetable returns the nodes the backend's load balancer can send the
// Service's traffic to.
func (b *backend) targetable(service *corev1.Service, nodes []*corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		if b.canTarget(service, n) {
			out = append(out, n)
		}
	}
	return out
}

func (b *backend) getLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	var exists bool
	status, err := call(ctx, b, opGetLoadBalancer, loadBalancerCallTimeout, func(ctx context.Context) (*corev1.LoadBalancerStatus, error) {
		status, ok, err := b.lb.GetLoadBalancer(ctx, clusterName, service)
		exists = ok
		return status, err
	})
	return status, exists, err
}

func (b *backend) ensureLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	return call(ctx, b, opEnsureLoadBalancer, loadBalancerCallTimeout, func(ctx context.Context) (*corev1.LoadBalancerStatus, error) {
		status, err := b.lb.EnsureLoadBalancer(ctx, clusterName, service, nodes)
		if err == nil && status == nil {
			err = errors.New("returned no status and no error")
		}
		return status, err
	})
}

func (b *backend) updateLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) error {
	_, err := call(ctx, b, opUpdateLoadBalancer, loadBalancerCallTimeout, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.lb.UpdateLoadBalancer(ctx, clusterName, service, nodes)
	})
	return err
}

func (b *backend) ensureLoadBalancerDeleted(ctx context.Context, clusterName string, service *corev1.Service) error {
	_, err := call(ctx, b, opEnsureLoadBalancerDeleted, loadBalancerCallTimeout, func(ctx context.Context) (struct{}, error) {
		err := b.lb.EnsureLoadBalancerDeleted(ctx, clusterName, service)
		if err == cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream sentinel, never wrapped.
			err = nil
		}
		return struct{}{}, err
	})
	return err
}

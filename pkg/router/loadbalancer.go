package router

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// Event reasons for Service problems. They are stable.
const (
	reasonUnknownLBBackend = "UnknownLoadBalancerBackend"
	reasonCleanupPending   = "LoadBalancerCleanupPending"
)

// lbTarget returns the backend that should hold service's load balancer:
// the annotation's, else the default, else nil (implemented elsewhere).
func (r *Router) lbTarget(service *corev1.Service) (*backend, error) {
	name, annotated := service.Annotations[annotation.LoadBalancerBackend]
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

// GetLoadBalancer asks every load-balancer backend: the load balancer exists
// if any backend holds any part of it, so a delete is never skipped while
// something is left. The status is the target backend's if it has one.
func (r *Router) GetLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	found, err := r.holders(ctx, clusterName, service, nil)
	if err != nil || len(found) == 0 {
		return nil, false, err
	}
	target, _ := r.lbTarget(service)
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
	if b, err := r.lbTarget(service); err == nil && b != nil {
		return b.lb.GetLoadBalancerName(ctx, clusterName, service)
	}
	return cloudprovider.DefaultLoadBalancerName(service)
}

// EnsureLoadBalancer creates or updates the load balancer in the target
// backend, handing it only the nodes it can target, then makes sure no other
// backend still holds one for the Service (the annotation may have moved
// it). A Service no backend serves gets ImplementedElsewhere, after any load
// balancer we made for it earlier is removed.
func (r *Router) EnsureLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	defer r.lockService(service)()
	r.clusterName.Store(clusterName)
	target, err := r.lbTarget(service)
	if err != nil {
		r.warn(ctx, serviceRef(service), reasonUnknownLBBackend, err.Error())
		return nil, err
	}
	if target == nil {
		if err := r.evict(ctx, clusterName, service, nil); err != nil {
			return nil, err
		}
		return nil, cloudprovider.ImplementedElsewhere
	}
	status, err := target.ensureLoadBalancer(ctx, clusterName, service, target.targetable(service, nodes))
	if err != nil {
		return nil, err
	}
	if err := r.evict(ctx, clusterName, service, target); err != nil {
		return nil, err
	}
	return status, nil
}

// UpdateLoadBalancer hands the target backend its targetable nodes.
func (r *Router) UpdateLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) error {
	defer r.lockService(service)()
	r.clusterName.Store(clusterName)
	target, err := r.lbTarget(service)
	if err != nil {
		return err
	}
	if target == nil {
		return cloudprovider.ImplementedElsewhere
	}
	return target.updateLoadBalancer(ctx, clusterName, service, target.targetable(service, nodes))
}

// EnsureLoadBalancerDeleted deletes the Service's load balancer from every
// backend that has load balancers; each backend's delete is idempotent. It
// fails, keeping the Service's finalizer, until every backend succeeded.
func (r *Router) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *corev1.Service) error {
	defer r.lockService(service)()
	err := ask(ctx, r.lbs, func(ctx context.Context, b *backend) (struct{}, error) {
		return struct{}{}, b.ensureLoadBalancerDeleted(ctx, clusterName, service)
	}, nil)
	if err != nil {
		return err
	}
	r.setHome(service, "", false)
	return nil
}

// evict removes the Service's load balancer from every backend but keep
// (nil: from all). It skips the check when the router already verified
// where the load balancer lives, and for a Service that never had an address
// and that the router has not seen: nothing can be left anywhere for it.
func (r *Router) evict(ctx context.Context, clusterName string, service *corev1.Service, keep *backend) error {
	keepName := ""
	if keep != nil {
		keepName = keep.Name
	}
	home, known := r.home(service)
	if known && home == keepName {
		return nil
	}
	if !known && len(service.Status.LoadBalancer.Ingress) == 0 {
		r.setHome(service, keepName, true)
		return nil
	}
	found, err := r.holders(ctx, clusterName, service, keep)
	if err == nil {
		err = r.deleteFrom(ctx, clusterName, service, found)
	}
	if err != nil {
		msg := fmt.Sprintf("Cannot yet remove the load balancer from the backends the Service no longer uses: %v", err)
		r.warn(ctx, serviceRef(service), reasonCleanupPending, msg)
		return fmt.Errorf("service %s/%s: %w", service.Namespace, service.Name, err)
	}
	r.setHome(service, keepName, true)
	return nil
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

// holders asks every load-balancer backend except skip, concurrently,
// whether it holds a load balancer for service. Any backend failing to
// answer is an error.
func (r *Router) holders(ctx context.Context, clusterName string, service *corev1.Service, skip *backend) ([]holder, error) {
	asked := make([]*backend, 0, len(r.lbs))
	for _, b := range r.lbs {
		if b != skip {
			asked = append(asked, b)
		}
	}
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

func (r *Router) home(service *corev1.Service) (string, bool) {
	r.lbMu.Lock()
	defer r.lbMu.Unlock()
	h, ok := r.lbHome[service.UID]
	return h, ok
}

func (r *Router) setHome(service *corev1.Service, name string, known bool) {
	r.lbMu.Lock()
	defer r.lbMu.Unlock()
	if known {
		r.lbHome[service.UID] = name
	} else {
		delete(r.lbHome, service.UID)
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

package lifecycle

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
)

// HeldAddresses returns the addresses of every load balancer the router
// holds for the Service, as the backends holding them report them: each
// backend that may hold one (reachable: the record, draining backends
// included, or, without a record, the Service's targets) is asked for its
// own, whatever the Service's spec says now (a class that is not, or no
// longer, ours; a Service no longer of type LoadBalancer). Unlike
// GetLoadBalancer, whose status is the targets' alone, the answer covers
// the backends the Service is leaving too. A recorded backend that is not
// configured cannot be asked: its name is in the error, returned with what
// the others answered, as is any backend's failure to answer.
func (r *Balancer) HeldAddresses(ctx context.Context, clusterName string, service *corev1.Service) ([]corev1.LoadBalancerIngress, error) {
	service = r.withClassDefaults(service)
	targets, _ := r.lbTargets(service)
	asked, gone := r.reachable(service, targets...)
	var errs []error
	for _, n := range gone {
		errs = append(errs, r.unreachableErr(service, n))
	}
	found, err := r.holders(ctx, clusterName, service, asked)
	var out []corev1.LoadBalancerIngress
	for _, h := range found {
		if h.status != nil {
			out = append(out, h.status.Ingress...)
		}
	}
	return out, errors.Join(append(errs, err)...)
}

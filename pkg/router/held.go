package router

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// HeldAddresses returns the addresses of every load balancer the router
// holds for the Service, in every backend that may hold one (its record,
// draining backends included), whatever its spec says now (see
// lifecycle.Balancer.HeldAddresses).
func (r *Router) HeldAddresses(ctx context.Context, clusterName string, service *corev1.Service) ([]corev1.LoadBalancerIngress, error) {
	return r.lb.HeldAddresses(ctx, clusterName, service)
}

// HeldAddresses is the configuration in use's answer.
func (rl *Reloadable) HeldAddresses(ctx context.Context, clusterName string, service *corev1.Service) ([]corev1.LoadBalancerIngress, error) {
	g := rl.acquire()
	defer g.release()
	return g.r.HeldAddresses(ctx, clusterName, service)
}

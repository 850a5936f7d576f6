package openstack

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

var _ backends.AddressTargeter = (*LoadBalancer)(nil)

// TargetsByAddress is true: a pool's members are the nodes' InternalIPs
// (memberAddress), so an address change of any node it can target changes
// the load balancer, and the node's providerID never does.
func (l *LoadBalancer) TargetsByAddress(_ *corev1.Service, _ *corev1.Node) bool { return true }

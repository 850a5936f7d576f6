package aws

import (
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
)

var _ backends.AddressTargeter = (*LoadBalancer)(nil)

// TargetsByAddress tells the router whether an address change of node
// changes the Service's NLB, following targetsFor: IP targets are the
// nodes' InternalIPs, instance targets their instance IDs.
//
//   - An IPv6-primary Service, or target type ip: IP targets, true.
//   - Target type instance: instance IDs, false (only EC2 instances are
//     handed then).
//   - No target type: a node of another cloud (a providerID of another
//     scheme) would be an IP target and make every target one, true; an
//     EC2 instance, or a node without a providerID yet (an IP target only
//     beside other IP targets, see targetsFor), is reached by address only
//     when the Service's targets were last chosen as IP targets (a node of
//     another cloud, another VPC or another region among them), or when
//     this process has not chosen them yet.
//
// A Service whose load balancer is managed elsewhere has nothing here:
// false.
func (l *LoadBalancer) TargetsByAddress(svc *corev1.Service, node *corev1.Node) bool {
	if managedElsewhere(svc) {
		return false
	}
	if primaryFamily(svc) == familyIPv6 {
		return true
	}
	switch v, _ := AnnotationTargetType.Get(svc.Annotations); v {
	case targetInstance:
		return false
	case "":
	default: // ip, or a value desired refuses: nothing to lose by re-targeting.
		return true
	}
	if node.Spec.ProviderID != "" {
		if s, err := providerid.Scheme(node.Spec.ProviderID); err != nil || s != Scheme {
			return true
		}
	}
	tt, known := l.targetTypes.of(svc)
	return !known || tt != targetInstance
}

// targetTypeMemory holds, per Service (by UID), the target type its
// targets were last computed with (desired), and whether they are IP
// targets to keep: with no target type annotated, the node set
// chooses it (targetsFor), and TargetsByAddress cannot see the node set;
// IP targets the node set chose are kept (keepIPTargets). It lives with
// the backend; a Service's entry goes with its load balancer's delete.
type targetTypeMemory struct{ m sync.Map }

// targetChoice is one Service's entry: its target type, and whether they
// are IP targets the node set chose for a node that is no instance of the
// VPC, kept until the annotation says otherwise.
type targetChoice struct {
	targetType string
	keepIP     bool
}

// remember records the target type of svc, and whether its IP targets are
// kept.
func (t *targetTypeMemory) remember(svc *corev1.Service, targetType string, keepIP bool) {
	t.m.Store(svc.UID, targetChoice{targetType: targetType, keepIP: keepIP && targetType == targetIP})
}

// of returns the target type last chosen for svc, if any.
func (t *targetTypeMemory) of(svc *corev1.Service) (string, bool) {
	c, ok := t.choice(svc)
	return c.targetType, ok
}

// choice returns svc's entry, if any.
func (t *targetTypeMemory) choice(svc *corev1.Service) (targetChoice, bool) {
	v, ok := t.m.Load(svc.UID)
	if !ok {
		return targetChoice{}, false
	}
	c, ok := v.(targetChoice)
	return c, ok
}

// forget drops svc's entry.
func (t *targetTypeMemory) forget(svc *corev1.Service) { t.m.Delete(svc.UID) }

package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// specFingerprint hashes what of the Service the backend's load balancer
// is made from: the Service's type, ports, source ranges, traffic policy
// and health-check NodePort, IP families, class, and its
// service.beta.kubernetes.io/ annotations (every annotation the backend
// reads). Other annotations (the router's records, kubectl's) and fields
// (the selector) leave it as it is.
func specFingerprint(svc *corev1.Service) string {
	s := svc.Spec
	annotations := maps.Clone(svc.Annotations)
	maps.DeleteFunc(annotations, func(k, _ string) bool { return !strings.HasPrefix(k, "service.beta.kubernetes.io/") })
	b, err := json.Marshal(struct {
		Type                          corev1.ServiceType
		Ports                         []corev1.ServicePort
		SourceRanges                  []string
		ExternalTrafficPolicy         corev1.ServiceExternalTrafficPolicy
		HealthCheckNodePort           int32
		IPFamilies                    []corev1.IPFamily
		IPFamilyPolicy                *corev1.IPFamilyPolicy
		LoadBalancerClass             *string
		LoadBalancerIP                string
		AllocateLoadBalancerNodePorts *bool
		Annotations                   map[string]string
	}{s.Type, s.Ports, s.LoadBalancerSourceRanges, s.ExternalTrafficPolicy, s.HealthCheckNodePort, s.IPFamilies, s.IPFamilyPolicy,
		s.LoadBalancerClass, s.LoadBalancerIP, s.AllocateLoadBalancerNodePorts, annotations})
	if err != nil { // plain data: cannot fail
		panic(fmt.Sprintf("fingerprint of Service %s/%s: %v", svc.Namespace, svc.Name, err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// specStale reports whether d was made from another version of the
// Service than the one the backend last began to reconcile the NLB for
// (specs): a node sync then changes only targets. Upstream's node sync
// hands the Service as it listed it, which can be the version before an
// edit whose Ensure already changed the NLB; the whole reconcile with that
// version would undo the edit (a port put back, the source ranges
// reopened, the targets moved back to an old NodePort). With no version
// known (a restart or takeover: the controllers list the Services afresh,
// so the version handed is the current one) the node sync is as it was.
// Left open: a reload that rebuilds the backend forgets the versions
// while the controller's copies stay, so a node sync in the moments after
// it is not known to be stale.
func (d *desiredLB) specStale() bool {
	return d.lbSpec != "" && d.lbSpec != d.spec
}

// specMemory is the version of each Service (specFingerprint, by
// namespace/name) the backend last began to reconcile its NLB for, in
// this process: recorded before the reconcile changes anything, so that a
// node sync handed an older version leaves the shape alone from then on.
type specMemory struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *specMemory) get(service string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[service]
}

// begin records spec for service, unless ctx is a plan's.
func (s *specMemory) begin(ctx context.Context, service, spec string) {
	if backends.DryRun(ctx) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]string{}
	}
	s.m[service] = spec
}

// forget drops service (its NLB deleted).
func (s *specMemory) forget(service string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, service)
}

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	annotations := awsAnnotations(svc)
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

// specMemory is, per Service (by namespace/name), the version the
// backend last began to reconcile its NLB for, in this process: recorded
// before the reconcile changes anything (begin). Upstream's node sync
// hands UpdateLoadBalancer the Service as it listed it, which can be the
// version from before an edit whose Ensure has already changed the NLB;
// the node sync with that version would undo the edit (a port put back or
// deleted, the targets moved back to an old NodePort, narrowed source
// ranges or target-node-labels reopened). So a node sync handed another
// version than the one begun brings the NLB's targets in line with the
// version begun instead (latest): the nodes are the node sync's news, the
// Service's shape is the last Ensure's. With none known (after a restart
// or a takeover the controllers list the Services afresh and ensure each,
// so the version handed is the current one) the version handed is used.
// A reload that rebuilds the backend has the new one share the old one's
// (register).
type specMemory struct {
	mu sync.Mutex
	m  map[string]versionBegun
}

// versionBegun is a Service as a reconcile began with it: its identity,
// its spec and its service.beta.kubernetes.io/ annotations (what the
// backend reads; specFingerprint hashes the same).
type versionBegun struct {
	spec string
	svc  *corev1.Service
}

// begin records svc (fingerprint spec) as the version its NLB is being
// reconciled for, unless ctx is a plan's.
func (s *specMemory) begin(ctx context.Context, spec string, svc *corev1.Service) {
	if backends.DryRun(ctx) || svc == nil {
		return
	}
	kept := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID, Annotations: awsAnnotations(svc)}}
	svc.Spec.DeepCopyInto(&kept.Spec)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]versionBegun{}
	}
	s.m[svc.Namespace+"/"+svc.Name] = versionBegun{spec: spec, svc: kept}
}

// latest is svc, or, when a reconcile of the same Service (same UID)
// began with another version, svc with that version's spec and
// service.beta.kubernetes.io/ annotations (its other annotations, labels
// and status as given).
func (s *specMemory) latest(svc *corev1.Service) (*corev1.Service, bool) {
	s.mu.Lock()
	v, ok := s.m[svc.Namespace+"/"+svc.Name]
	s.mu.Unlock()
	if !ok || v.svc.UID != svc.UID || v.spec == specFingerprint(svc) {
		return svc, false
	}
	out := svc.DeepCopy()
	v.svc.Spec.DeepCopyInto(&out.Spec)
	maps.DeleteFunc(out.Annotations, func(k, _ string) bool { return strings.HasPrefix(k, awsAnnotationPrefix) })
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	maps.Copy(out.Annotations, v.svc.Annotations)
	return out, true
}

// forget drops service (its NLB deleted).
func (s *specMemory) forget(service string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, service)
}

// awsAnnotationPrefix prefixes every annotation the backend reads.
const awsAnnotationPrefix = "service.beta.kubernetes.io/"

// awsAnnotations are svc's annotations under awsAnnotationPrefix.
func awsAnnotations(svc *corev1.Service) map[string]string {
	out := maps.Clone(svc.Annotations)
	maps.DeleteFunc(out, func(k, _ string) bool { return !strings.HasPrefix(k, awsAnnotationPrefix) })
	return out
}

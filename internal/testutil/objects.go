package testutil

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// NodeTweak adjusts a Node built by NewNode.
type NodeTweak func(*corev1.Node)

// NewNode builds a Node with a UID derived from its name; tweaks adjust it.
func NewNode(name string, tweaks ...NodeTweak) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{}}}
	for _, t := range tweaks {
		t(n)
	}
	return n
}

// WithProviderID sets spec.providerID.
func WithProviderID(id string) NodeTweak { return func(n *corev1.Node) { n.Spec.ProviderID = id } }

// WithLabel sets a label.
func WithLabel(k, v string) NodeTweak { return func(n *corev1.Node) { n.Labels[k] = v } }

// WithAddress adds a status address.
func WithAddress(t corev1.NodeAddressType, a string) NodeTweak {
	return func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: t, Address: a})
	}
}

// WithInternalIP adds an InternalIP address.
func WithInternalIP(ip string) NodeTweak { return WithAddress(corev1.NodeInternalIP, ip) }

// Uninitialized adds the external cloud provider's uninitialized taint, as
// a kubelet with --cloud-provider=external does.
func Uninitialized(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule})
}

// NotReady marks the node NotReady, as the node-lifecycle controller wants
// before it asks the cloud whether the node still exists.
func NotReady(n *corev1.Node) {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
}

// ServiceTweak adjusts a Service built by NewService.
type ServiceTweak func(*corev1.Service)

// NewService builds a LoadBalancer Service in namespace default with a UID
// derived from its name and one TCP port, 80 on NodePort 30080 (named
// http); tweaks adjust it.
func NewService(name string, tweaks ...ServiceTweak) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, UID: types.UID("uid-" + name), Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080}},
		},
	}
	for _, t := range tweaks {
		t(s)
	}
	return s
}

// WithAnnotation sets an annotation.
func WithAnnotation(k, v string) ServiceTweak {
	return func(s *corev1.Service) { s.Annotations[k] = v }
}

// WithNamespace moves the Service to namespace ns.
func WithNamespace(ns string) ServiceTweak { return func(s *corev1.Service) { s.Namespace = ns } }

// WithPorts replaces the ports with the given ones.
func WithPorts(ports ...corev1.ServicePort) ServiceTweak {
	return func(s *corev1.Service) { s.Spec.Ports = ports }
}

// Port is a ServicePort named after its protocol and port.
func Port(proto corev1.Protocol, port, nodePort int32) corev1.ServicePort {
	return corev1.ServicePort{Name: strings.ToLower(string(proto)) + "-" + strconv.Itoa(int(port)), Protocol: proto, Port: port, NodePort: nodePort}
}

// WithLocalTraffic sets externalTrafficPolicy: Local with the given health
// check node port.
func WithLocalTraffic(hcPort int32) ServiceTweak {
	return func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hcPort
	}
}

// WithSourceRanges sets spec.loadBalancerSourceRanges.
func WithSourceRanges(r ...string) ServiceTweak {
	return func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = r }
}

// WithClass sets spec.loadBalancerClass.
func WithClass(class string) ServiceTweak {
	return func(s *corev1.Service) { s.Spec.LoadBalancerClass = &class }
}

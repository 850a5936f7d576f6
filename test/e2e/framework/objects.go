package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller"
)

// UninitializedTaint is the taint a kubelet started with
// --cloud-provider=external puts on its Node until the CCM initialises it.
const UninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// NodeTweak changes a Node built by NewNode.
type NodeTweak func(*corev1.Node)

// NewNode builds a Node the way a kubelet with --cloud-provider=external
// registers it: tainted uninitialised, Ready=True, with no providerID and
// no addresses. Tweaks change it.
func NewNode(name string, tweaks ...NodeTweak) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name,
			"kubernetes.io/os":       "linux",
		}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}
	WithReady(corev1.ConditionTrue)(n)
	for _, t := range tweaks {
		t(n)
	}
	return n
}

// WithProviderID sets spec.providerID (kubelet --provider-id).
func WithProviderID(id string) NodeTweak { return func(n *corev1.Node) { n.Spec.ProviderID = id } }

// WithLabel adds a label (kubelet --node-labels).
func WithLabel(k, v string) NodeTweak { return func(n *corev1.Node) { n.Labels[k] = v } }

// WithoutUninitializedTaint builds a node some CCM already initialised.
func WithoutUninitializedTaint() NodeTweak {
	return func(n *corev1.Node) { n.Spec.Taints = nil }
}

// WithReady sets the Ready condition's status.
func WithReady(status corev1.ConditionStatus) NodeTweak {
	return func(n *corev1.Node) { n.Status.Conditions = []corev1.NodeCondition{readyCondition(status)} }
}

// WithAddresses sets status.addresses, as a kubelet does with --node-ip.
func WithAddresses(addrs ...corev1.NodeAddress) NodeTweak {
	return func(n *corev1.Node) { n.Status.Addresses = addrs }
}

func readyCondition(status corev1.ConditionStatus) corev1.NodeCondition {
	now := metav1.Now()
	return corev1.NodeCondition{
		Type: corev1.NodeReady, Status: status, Reason: "E2E",
		Message: "set by the e2e framework", LastHeartbeatTime: now, LastTransitionTime: now,
	}
}

// CreateNode creates node and then writes its status (conditions and, if
// any, addresses) through the status subresource with a patch, as a
// kubelet does; a patch because the CCM may already have changed the node.
func CreateNode(ctx context.Context, c kubernetes.Interface, node *corev1.Node) (*corev1.Node, error) {
	status := map[string]any{"conditions": node.Status.Conditions}
	if len(node.Status.Addresses) > 0 {
		status["addresses"] = node.Status.Addresses
	}
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create node %s: %w", node.Name, err)
	}
	return patchNodeStatus(ctx, c, node.Name, status)
}

func patchNodeStatus(ctx context.Context, c kubernetes.Interface, name string, status map[string]any) (*corev1.Node, error) {
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	n, err := c.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("node %s: patch status: %w", name, err)
	}
	return n, nil
}

// SetNodeReady patches the node's Ready condition to status.
func SetNodeReady(ctx context.Context, c kubernetes.Interface, name string, status corev1.ConditionStatus) error {
	_, err := patchNodeStatus(ctx, c, name, map[string]any{"conditions": []corev1.NodeCondition{readyCondition(status)}})
	return err
}

// ServiceTweak changes a Service built by NewLoadBalancerService.
type ServiceTweak func(*corev1.Service)

// NewLoadBalancerService builds a Service of type LoadBalancer with one TCP
// port 80 and a selector. Tweaks change it.
func NewLoadBalancerService(namespace, name string, tweaks ...ServiceTweak) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, t := range tweaks {
		t(s)
	}
	return s
}

// WithAnnotation sets a Service annotation.
func WithAnnotation(k, v string) ServiceTweak {
	return func(s *corev1.Service) { s.Annotations[k] = v }
}

// WithPort replaces the Service's ports with one port of protocol proto.
func WithPort(name string, port int32, proto corev1.Protocol) ServiceTweak {
	return func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(port)}}
	}
}

// WithLoadBalancerClass sets spec.loadBalancerClass (upstream's service
// controller then ignores the Service).
func WithLoadBalancerClass(class string) ServiceTweak {
	return func(s *corev1.Service) { s.Spec.LoadBalancerClass = &class }
}

// CreateService creates svc.
func CreateService(ctx context.Context, c kubernetes.Interface, svc *corev1.Service) (*corev1.Service, error) {
	created, err := c.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return created, nil
}

// IngressIPs lists the addresses in the Service's status.loadBalancer.
func IngressIPs(svc *corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		}
	}
	return out
}

// HasFinalizer reports whether obj carries finalizer f.
func HasFinalizer(obj metav1.Object, f string) bool {
	return slices.Contains(obj.GetFinalizers(), f)
}

// CleanupFinalizer is the cleanup finalizer a CCM keeps on svc while it
// holds its load balancer: ours (lbcontroller.Finalizer) on a Service of a
// loadBalancerClass, upstream's shared one on a classless Service.
func CleanupFinalizer(svc *corev1.Service) string {
	if svc.Spec.LoadBalancerClass != nil {
		return lbcontroller.Finalizer
	}
	return servicehelper.LoadBalancerCleanupFinalizer
}

// HasCleanupFinalizer reports whether svc carries its CleanupFinalizer.
func HasCleanupFinalizer(svc *corev1.Service) bool {
	return HasFinalizer(svc, CleanupFinalizer(svc))
}

// HasTaint reports whether node carries a taint with key.
func HasTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// Events lists the core/v1 Events about the object of kind and name (in
// namespace; "" for cluster-scoped objects, whose events may land in any
// namespace), oldest first.
func Events(ctx context.Context, c kubernetes.Interface, kind, namespace, name string) ([]corev1.Event, error) {
	sel := fmt.Sprintf("involvedObject.kind=%s,involvedObject.name=%s", kind, name)
	if namespace != "" {
		sel += ",involvedObject.namespace=" + namespace
	}
	list, err := c.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("events for %s %s: %w", kind, name, err)
	}
	return list.Items, nil
}

// apiServerControllers are the kube-apiserver's own controllers that
// record events on Services: its ClusterIP and NodePort allocators'
// repair loops ("Cluster IP … is not allocated; repairing", when a
// Service is created while a repair pass runs).
var apiServerControllers = map[string]bool{
	"ipallocator-repair-controller":   true,
	"portallocator-repair-controller": true,
}

// NotFromAPIServer returns the events not recorded by the kube-apiserver's
// own controllers: what the CCM (or anything else) said about the object.
func NotFromAPIServer(events []corev1.Event) []corev1.Event {
	var out []corev1.Event
	for _, e := range events {
		if !apiServerControllers[e.ReportingController] && !apiServerControllers[e.Source.Component] {
			out = append(out, e)
		}
	}
	return out
}

// FindEvent returns the first event of eventType (and reason, when not
// empty) in events, or nil.
func FindEvent(events []corev1.Event, eventType, reason string) *corev1.Event {
	for i := range events {
		if events[i].Type == eventType && (reason == "" || events[i].Reason == reason) {
			return &events[i]
		}
	}
	return nil
}

// DescribeEvents renders events one per line for failure messages.
func DescribeEvents(events []corev1.Event) string {
	out := ""
	for _, e := range events {
		out += fmt.Sprintf("  %s %s %s: %s (x%d)\n", e.Source.Component, e.Type, e.Reason, e.Message, e.Count)
	}
	if out == "" {
		return "  (no events)\n"
	}
	return out
}

// LeaseHolder returns the holder identity of the Lease namespace/name (the
// CCM's leader election lock is kube-system/cloud-controller-manager by
// default), or "" when it has none.
func LeaseHolder(ctx context.Context, c kubernetes.Interface, namespace, name string) (string, error) {
	l, err := c.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("lease %s/%s: %w", namespace, name, err)
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}

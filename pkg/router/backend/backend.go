package backend

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
)

// Deadlines the router puts on every backend call. The upstream controllers
// pass contexts without deadlines; a cloud that hangs must not hold a
// controller worker for ever.
const (
	// InstanceCallTimeout bounds InstanceExists, InstanceShutdown and
	// InstanceMetadata, and each backend's answer while claiming a node.
	InstanceCallTimeout = 30 * time.Second
	// LoadBalancerCallTimeout bounds load-balancer calls, which may create
	// several cloud resources in one call.
	LoadBalancerCallTimeout = 5 * time.Minute
	// routeCallTimeout bounds route calls.
	routeCallTimeout = time.Minute
	// MaxFanOut bounds how many backends are asked at once.
	MaxFanOut = 8
)

// Backend is one cloud behind the router, as New receives it.
type Backend struct {
	// Name is unique; Services and Node labels refer to it.
	Name string
	// Type is the backend type (aws, baremetal, ...), for logs.
	Type string
	// Scheme is the providerID scheme of the backend's nodes, or "".
	Scheme string
	// Cloud is the backend itself.
	Cloud cloudprovider.Interface
}

// Member is a Backend with its capabilities resolved once, as one
// configuration holds it.
type Member struct {
	Backend
	Instances cloudprovider.InstancesV2
	LB        cloudprovider.LoadBalancer
	Routes    cloudprovider.Routes
	metrics   *backendMetrics
	Health    *health
	loggers   [numOperations]klog.Logger
	// Scopes holds, per operation, the scope serving its calls (see
	// scope.go).
	Scopes [numOperations]atomic.Pointer[scope]
}

// New resolves b's capabilities, with a new Health (up).
func New(b Backend) *Member { return NewWith(b, nil) }

// NewWith is New keeping h, the health of the backend it
// replaces in place (nil: a new one, up).
func NewWith(b Backend, h *health) *Member {
	if h == nil {
		h = NewHealth(b.Name)
	}
	nb := &Member{Backend: b, metrics: newBackendMetrics(b.Name), Health: h}
	for op := operation(0); op < numOperations; op++ {
		nb.loggers[op] = klog.Background().WithValues("backend", b.Name, "operation", op.String())
	}
	if i, ok := b.Cloud.InstancesV2(); ok && i != nil {
		nb.Instances = i
	}
	if lb, ok := b.Cloud.LoadBalancer(); ok && lb != nil {
		nb.LB = lb
	}
	if r, ok := b.Cloud.Routes(); ok && r != nil {
		nb.Routes = r
	}
	return nb
}

// Call runs one call to the backend with the router's deadline for that
// kind of call (see the constants above) and a logger carrying the backend
// and operation in its context, records it in the backend's metrics, and
// wraps its error with the backend and operation: backends name neither in
// their logs or errors. The context comes from the backend's scope for the
// operation (see scope.go), so a call answered from memory allocates
// nothing for it.
func call[T any](ctx context.Context, b *Member, op operation, timeout time.Duration, fn func(context.Context) (T, error)) (T, error) {
	start := time.Now()
	s := b.Scope(ctx, op, timeout, start)
	defer s.Release()
	v, err := fn(s.Ctx)
	b.done(op, start, err)
	b.Health.Observe(ctx, op, err)
	return v, b.wrap(op, err)
}

// logger returns the caller's logger with the backend and operation added;
// when the caller's context carries none, one built once per operation.
func (b *Member) logger(ctx context.Context, op operation) klog.Logger {
	if l, err := logr.FromContext(ctx); err == nil {
		return l.WithValues("backend", b.Name, "operation", op.String())
	}
	return b.loggers[op]
}

// done records a finished call in the backend's metrics.
func (b *Member) done(op operation, start time.Time, err error) {
	res := resultSuccess
	if err != nil {
		res = resultError
		b.metrics.errors[op][Classify(err)].Inc()
	}
	b.metrics.requests[op][res].Inc()
	b.metrics.duration[op].Observe(time.Since(start).Seconds())
}

// wrap prefixes a backend's error with the backend and operation, leaving
// cloudprovider.ImplementedElsewhere unwrapped as upstream compares it with ==.
func (b *Member) wrap(op operation, err error) error {
	if err == nil || err == cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream compares with ==.
		return err
	}
	return fmt.Errorf("backend %s: %s: %w", b.Name, op, err)
}

// Unnamed is err's message without the "backend <name>: " wrap puts
// first, for a message that names the backend itself ("Backend a cannot
// serve ...: EnsureLoadBalancer: connection refused").
func (b *Member) Unnamed(err error) string {
	return strings.TrimPrefix(err.Error(), "backend "+b.Name+": ")
}

// Owns reports whether node is one of this backend's own nodes: its
// backend label names this backend, or it has no such label and its
// providerID carries the backend's scheme.
func (b *Member) Owns(node *corev1.Node) bool {
	if name, ok := node.Labels[string(annotation.NodeBackend)]; ok {
		return name == b.Name
	}
	if b.Scheme == "" || node.Spec.ProviderID == "" {
		return false
	}
	scheme, err := providerid.Scheme(node.Spec.ProviderID)
	return err == nil && scheme == b.Scheme
}

// IgnoresNodes reports whether the backend's load balancer never sends
// traffic to the nodes it is handed (backends.NodeIndependent).
func (b *Member) IgnoresNodes() bool {
	ni, ok := b.LB.(backends.NodeIndependent)
	return ok && ni.IgnoresNodes()
}

// AnnouncedFromStatus reports whether the backend's load balancer is
// announced from the Service's status (backends.StatusAnnounced): a drain
// keeps its addresses in the status.
func (b *Member) AnnouncedFromStatus() bool {
	sa, ok := b.LB.(backends.StatusAnnounced)
	return ok && sa.AnnouncedFromStatus()
}

// canTarget reports whether the backend's load balancer can send service's
// traffic to node.
func (b *Member) canTarget(service *corev1.Service, node *corev1.Node) bool {
	if t, ok := b.LB.(backends.NodeTargeter); ok {
		return t.CanTarget(service, node)
	}
	return b.Owns(node)
}

// targetsByAddress reports whether the backend's load balancer reaches
// node by its addresses for service (backends.AddressTargeter): never for
// one that ignores its nodes, always for one that does not say.
func (b *Member) targetsByAddress(service *corev1.Service, node *corev1.Node) bool {
	if b.IgnoresNodes() {
		return false
	}
	if t, ok := b.LB.(backends.AddressTargeter); ok {
		return t.TargetsByAddress(service, node)
	}
	return true
}

// RetargetsOn reports whether an address change of a node, from old to
// node, changes service's load balancer in this backend: it can target
// the node before or after the change (a node that lost its address must
// leave) and reaches it by address then.
func (b *Member) RetargetsOn(service *corev1.Service, old, node *corev1.Node) bool {
	reached := func(n *corev1.Node) bool { return b.canTarget(service, n) && b.targetsByAddress(service, n) }
	return reached(node) || reached(old)
}

// targetKey is what the backend's load balancer uses of a node it targets
// for service: its InternalIP and ExternalIP addresses when it reaches the
// node by address, else its providerID. Two versions of a node with the
// same key make the same load balancer.
func (b *Member) targetKey(service *corev1.Service, node *corev1.Node) string {
	if b.targetsByAddress(service, node) {
		return "addresses:" + strings.Join(TargetAddresses(node), ",")
	}
	return "providerID:" + node.Spec.ProviderID
}

// TargetAddresses returns the node's InternalIP and ExternalIP addresses,
// each with its type, sorted and without duplicates: the addresses a load
// balancer may target. A Hostname or DNS entry, or another order, is not
// a change.
func TargetAddresses(node *corev1.Node) []string {
	var out []string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			out = append(out, string(a.Type)+"="+a.Address)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

package backends

import (
	"context"
	"slices"
	"sync"
)

// ReportChange tells the caller of EnsureLoadBalancer or UpdateLoadBalancer
// what the call changed in the cloud on a load balancer that already
// existed, in a few words an operator understands ("listener TCP:80
// re-created", "target i-0abc registered", "member 10.0.0.5:30080 added",
// "security-group rule tcp/30080 from 0.0.0.0/0 restored"). Call it once per
// mutating cloud call that changed an existing load balancer, with the ctx
// the call was given; creating a load balancer from nothing is not a
// change to report. Outside WithChangeReport it does nothing.
//
// The load-balancer controller re-ensures every Service it serves each
// --load-balancer-resync-period; what such a pass reports is drift that was
// repaired (event LoadBalancerDriftRepaired, metric
// multicloud_ccm_load_balancer_drift_repairs_total).
//
// Within WithChangeBackend, the change is also attributed to that backend
// (ChangedBackends): the router names the backend of each call, so that a
// repair of a Service served by several backends is counted in the one
// that drifted.
func ReportChange(ctx context.Context, what string) {
	if l, ok := ctx.Value(changeKey{}).(*changeLog); ok {
		l.mu.Lock()
		l.changes = append(l.changes, what)
		if b, ok := ctx.Value(changeBackendKey{}).(string); ok && !slices.Contains(l.backends, b) {
			l.backends = append(l.backends, b)
		}
		l.mu.Unlock()
	}
}

// WithChangeBackend returns a ctx under which what ReportChange reports is
// attributed to the backend named; ctx itself when it carries no change
// report (WithChangeReport), so that calls outside one pay nothing.
func WithChangeBackend(ctx context.Context, name string) context.Context {
	if _, ok := ctx.Value(changeKey{}).(*changeLog); !ok {
		return ctx
	}
	return context.WithValue(ctx, changeBackendKey{}, name)
}

// ChangedBackends returns the backends, in the order they first reported,
// to which the changes reported through ctx (a ctx WithChangeReport
// returned) were attributed by WithChangeBackend. Changes reported outside
// WithChangeBackend are attributed to none.
func ChangedBackends(ctx context.Context) []string {
	l, ok := ctx.Value(changeKey{}).(*changeLog)
	if !ok {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.backends)
}

// WithChangeReport returns a ctx through which ReportChange reaches the
// returned function, which gives the changes reported so far in order.
func WithChangeReport(ctx context.Context) (context.Context, func() []string) {
	l := &changeLog{}
	return context.WithValue(ctx, changeKey{}, l), func() []string {
		l.mu.Lock()
		defer l.mu.Unlock()
		return append([]string(nil), l.changes...)
	}
}

type (
	changeKey        struct{}
	changeBackendKey struct{}
)

type changeLog struct {
	mu       sync.Mutex
	changes  []string
	backends []string
}

// RepairPasser is implemented by a backend that can read all of its load
// balancers in bulk, so that a drift-repair pass over N Services costs a
// few list calls per page instead of N times the describes of one
// EnsureLoadBalancer.
type RepairPasser interface {
	// BeginRepairPass reads, with bulk list/describe calls, what
	// EnsureLoadBalancer compares for every load balancer of clusterName
	// the backend holds, and returns a ctx under which EnsureLoadBalancer
	// reads from that snapshot instead of the cloud (a load balancer
	// missing from the snapshot is read from the cloud as usual; mutating
	// calls go to the cloud and keep the snapshot correct or mark the load
	// balancer to be read again). end releases the snapshot. An error
	// means no snapshot: the pass then runs with per-Service reads.
	BeginRepairPass(ctx context.Context, clusterName string) (passCtx context.Context, end func(), err error)
}

// Passes is the set of drift-repair passes a backend has under way (see
// RepairPasser), so that a call outside a pass can update or drop what the
// passes hold. The zero value is empty and ready.
type Passes[T comparable] struct {
	mu  sync.Mutex
	set map[T]struct{}
}

// Add registers a pass and returns the function removing it (the end that
// BeginRepairPass returns).
func (s *Passes[T]) Add(p T) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = map[T]struct{}{}
	}
	s.set[p] = struct{}{}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.set, p)
	}
}

// Each calls f on every pass under way, outside the set's lock.
func (s *Passes[T]) Each(f func(T)) {
	s.mu.Lock()
	all := make([]T, 0, len(s.set))
	for p := range s.set {
		all = append(all, p)
	}
	s.mu.Unlock()
	for _, p := range all {
		f(p)
	}
}

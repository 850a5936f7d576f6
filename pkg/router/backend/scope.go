package backend

import (
	"context"
	"reflect"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// ScopeReuse is how long one call scope serves new calls. Every call gets
// at least its operation's timeout, and at most scopeReuse more.
const ScopeReuse = time.Second

// scopeRetired marks, in scope.refs, a scope that serves no new calls: the
// last call holding it cancels its context.
const scopeRetired = int64(1) << 62

// scope is the context call hands a backend: the caller's context with the
// operation's logger and, unless the caller's own deadline is sooner, the
// router's deadline. It is built with klog.NewContext and
// context.WithDeadline, once for many calls: the upstream controllers pass
// the same long-lived context to every call of a sweep, so calls that start
// within scopeReuse of each other with the same parent context share one
// scope, and a call answered from memory allocates nothing for its context,
// logger or deadline. A parent that cannot be compared gets a scope of its
// own per call.
type scope struct {
	parent context.Context
	Ctx    context.Context
	cancel context.CancelFunc
	// until is when the scope stops serving new calls; zero when the
	// parent's own deadline bounds every call and the scope serves that
	// parent for as long as it is asked.
	until time.Time
	// refs counts the calls holding the scope, plus scopeRetired once the
	// scope was replaced.
	refs atomic.Int64
}

// newScope returns a scope over parent for calls of the backend named
// starting at now, held once by the caller. What the calls report changed
// is attributed to that backend (backends.WithChangeBackend).
func newScope(parent context.Context, backend string, logger klog.Logger, timeout time.Duration, now time.Time) *scope {
	s := &scope{parent: parent}
	s.refs.Store(1)
	ctx := klog.NewContext(backends.WithChangeBackend(parent, backend), logger)
	if d, ok := parent.Deadline(); ok && d.Before(now.Add(timeout)) {
		s.Ctx, s.cancel = ctx, func() {}
		return s
	}
	s.until = now.Add(ScopeReuse)
	s.Ctx, s.cancel = context.WithDeadline(ctx, now.Add(timeout+ScopeReuse))
	return s
}

// acquire holds s for a call with parent starting at now, and reports
// whether it may: s serves that parent, still serves new calls, and was
// not retired.
func (s *scope) acquire(parent context.Context, now time.Time) bool {
	if s == nil || !sameContext(s.parent, parent) || (!s.until.IsZero() && !now.Before(s.until)) {
		return false
	}
	for {
		n := s.refs.Load()
		if n&scopeRetired != 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// sameContext reports whether a and b are the same context. Contexts whose
// comparison panics (a comparable wrapper around one that is not) are not.
func sameContext(a, b context.Context) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// Release ends one call's hold on s.
func (s *scope) Release() {
	if s.refs.Add(-1) == scopeRetired {
		s.cancel()
	}
}

// retire stops s from serving new calls; its context ends when the last
// call holding it returns.
func (s *scope) retire() {
	if s != nil && s.refs.Or(scopeRetired) == 0 {
		s.cancel()
	}
}

// Scope returns a held scope for a call of op with parent ctx starting at
// now: the backend's current scope for op when it serves the call, else a
// new one, which becomes the current scope when ctx can be compared.
func (b *Member) Scope(ctx context.Context, op operation, timeout time.Duration, now time.Time) *scope {
	slot := &b.Scopes[op]
	cur := slot.Load()
	if cur.acquire(ctx, now) {
		return cur
	}
	s := newScope(ctx, b.Name, b.logger(ctx, op), timeout, now)
	if !reflect.TypeOf(ctx).Comparable() || !slot.CompareAndSwap(cur, s) {
		s.retire() // this call's alone
		return s
	}
	cur.retire()
	return s
}

package backends

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// ServiceLocks serialises a backend's load-balancer calls for one Service.
// Upstream's service controller calls UpdateLoadBalancer from its node
// sync while a worker may be in EnsureLoadBalancer for the same Service,
// and the router re-targets on node address changes from its own
// goroutine: two calls for one Service, each reading the cloud and then
// writing from what it read, build two load balancers' worth of parts (a
// target group of each type, a listener moved back and forth). Each call
// holds its Service's lock; calls for different Services run side by side.
// The locks live for the backend (one configuration) and hold nothing
// between calls.
type ServiceLocks struct {
	mu    sync.Mutex
	locks map[string]*serviceLock
}

type serviceLock struct {
	sem   chan struct{}
	users int
}

// Lock waits for the Service's lock, or for ctx to end (its error is
// returned and nothing is held). unlock must be called once.
func (s *ServiceLocks) Lock(ctx context.Context, svc *corev1.Service) (unlock func(), err error) {
	key := string(svc.UID)
	if key == "" {
		key = svc.Namespace + "/" + svc.Name
	}
	return s.LockKey(ctx, key)
}

// LockKey is Lock for any key: a cloud resource several Services change
// (a shared load balancer's tags, by its ID).
func (s *ServiceLocks) LockKey(ctx context.Context, key string) (unlock func(), err error) {
	s.mu.Lock()
	if s.locks == nil {
		s.locks = map[string]*serviceLock{}
	}
	l := s.locks[key]
	if l == nil {
		l = &serviceLock{sem: make(chan struct{}, 1)}
		s.locks[key] = l
	}
	l.users++
	s.mu.Unlock()
	release := func() {
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.locks, key)
		}
		s.mu.Unlock()
	}
	select {
	case l.sem <- struct{}{}:
		return func() { <-l.sem; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

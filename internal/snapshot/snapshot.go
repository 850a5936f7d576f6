// Package snapshot is the backends' one bulk-listing cache: a backend lists
// its cloud's instances in one call, indexes them into a snapshot, and
// serves lookups from it. The cache refreshes the snapshot when it is older
// than a TTL, or on a miss when it is older than a miss interval; merges
// concurrent refreshes into one listing that outlives a caller giving up;
// and, for a backoff after a failed listing, answers with that failure
// instead of listing again, so a cloud that is down is not asked once per
// lookup.
package snapshot

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Config holds a cache's settings.
type Config struct {
	// Backend names the backend in metrics.
	Backend string
	// Source names what is listed in the listing metrics, where a backend
	// lists several things (a vCenter's host); empty for one listing.
	Source string
	// TTL is the age from which a snapshot is refreshed on the next lookup.
	TTL time.Duration
	// MissInterval is the age from which a lookup that misses refreshes the
	// snapshot. It is capped at TTL.
	MissInterval time.Duration
	// FailureBackoff is how long a failed listing is answered with its
	// error, without listing again. Zero retries at once.
	FailureBackoff time.Duration
	// ListTimeout bounds one listing. Zero is no bound beyond the fetch's own.
	ListTimeout time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Fetch lists in bulk and indexes the result. Its context is detached
// from the callers' cancellation and bounded by Config.ListTimeout.
type Fetch[S any] func(ctx context.Context) (S, error)

// Cache holds the last snapshot of type S.
type Cache[S any] struct {
	cfg     Config
	fetch   Fetch[S]
	metrics *cacheMetrics
	sf      singleflight.Group

	mu      sync.Mutex
	snap    S
	have    bool
	fetched time.Time // when the listing of snap began
	// failed is the last listing's error and failedAt when it ended.
	failed   error
	failedAt time.Time
}

// New returns an empty cache listing with fetch.
func New[S any](cfg Config, fetch Fetch[S]) *Cache[S] {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.MissInterval = min(cfg.MissInterval, cfg.TTL)
	return &Cache[S]{cfg: cfg, fetch: fetch, metrics: metricsFor(cfg.Backend, cfg.Source)}
}

// Config returns the cache's settings.
func (c *Cache[S]) Config() Config { return c.cfg }

// Current returns the cached snapshot and when its listing began, without
// listing; ok is false when there is none.
func (c *Cache[S]) Current() (s S, fetched time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap, c.fetched, c.have
}

// Invalidate forgets the snapshot (not a recent failure), so the next
// lookup lists.
func (c *Cache[S]) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero S
	c.snap, c.have, c.fetched = zero, false, time.Time{}
}

// ForgetFailure forgets a recent failed listing, so the next lookup lists
// without waiting out the backoff.
func (c *Cache[S]) ForgetFailure() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed = nil
}

// Fresh returns a snapshot younger than maxAge, listing if the cached one
// is not.
func (c *Cache[S]) Fresh(ctx context.Context, maxAge time.Duration) (S, error) {
	return c.Since(ctx, c.cfg.Now().Add(-maxAge+1))
}

// Get returns a snapshot younger than the TTL.
func (c *Cache[S]) Get(ctx context.Context) (S, error) { return c.Fresh(ctx, c.cfg.TTL) }

// Since returns a snapshot whose listing began at notBefore or later,
// listing if the cached one began earlier. Concurrent callers share one
// listing; a caller whose context ends returns while the listing carries
// on for the others. For the backoff after a failed listing, the failure
// is returned without listing.
func (c *Cache[S]) Since(ctx context.Context, notBefore time.Time) (S, error) {
	var zero S
	for range 2 {
		if s, ok := c.since(notBefore); ok {
			return s, nil
		}
		if err := c.recentFailure(); err != nil {
			return zero, err
		}
		ch := c.sf.DoChan("list", func() (any, error) { return c.listUnlessFresh(ctx, notBefore) })
		select {
		case r := <-ch:
			if r.Err != nil {
				return zero, r.Err
			}
			if l := r.Val.(listed[S]); !l.fetched.Before(notBefore) {
				return l.snap, nil
			}
			// The listing joined began before notBefore: start another.
		case <-ctx.Done():
			return zero, fmt.Errorf("waiting for the listing: %w", ctx.Err())
		}
	}
	return zero, fmt.Errorf("no listing begun after %s", notBefore.Format(time.RFC3339Nano))
}

// listed is one listing's result, passed through singleflight.
type listed[S any] struct {
	snap    S
	fetched time.Time
}

func (c *Cache[S]) since(notBefore time.Time) (S, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.have && !c.fetched.Before(notBefore) {
		return c.snap, true
	}
	var zero S
	return zero, false
}

// listUnlessFresh lists unless a listing that ended between the caller's
// look at the cache and its joining the flight already gives what it
// needs: without this check, a caller arriving as a listing ends would list
// again.
func (c *Cache[S]) listUnlessFresh(ctx context.Context, notBefore time.Time) (listed[S], error) {
	c.mu.Lock()
	if c.have && !c.fetched.Before(notBefore) {
		defer c.mu.Unlock()
		return listed[S]{c.snap, c.fetched}, nil
	}
	c.mu.Unlock()
	return c.list(ctx)
}

// list runs one listing, detached from the caller's cancellation.
func (c *Cache[S]) list(ctx context.Context) (listed[S], error) {
	ctx = context.WithoutCancel(ctx)
	if c.cfg.ListTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.ListTimeout)
		defer cancel()
	}
	started := c.cfg.Now()
	s, err := c.fetch(ctx)
	c.metrics.observeList(err, c.cfg.Now().Sub(started))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed, c.failedAt = err, c.cfg.Now()
	if err != nil {
		return listed[S]{}, err
	}
	c.snap, c.have, c.fetched = s, true, started
	return listed[S]{s, started}, nil
}

// recentFailure returns the last listing's error if it failed less than
// the backoff ago.
func (c *Cache[S]) recentFailure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed == nil {
		return nil
	}
	ago := c.cfg.Now().Sub(c.failedAt)
	if ago >= c.cfg.FailureBackoff {
		return nil
	}
	c.metrics.backedOff.Inc()
	return fmt.Errorf("%w (the last listing, %s ago; retried after %s)", c.failed, ago.Round(time.Millisecond), c.cfg.FailureBackoff)
}

// RecordLookup counts a lookup the backend made itself, across its
// snapshots: a hit when found, else a miss.
func (c *Cache[S]) RecordLookup(found bool) {
	if found {
		c.metrics.hits.Inc()
	} else {
		c.metrics.misses.Inc()
	}
}

// Lookup finds a value with find in a snapshot younger than the TTL and,
// if find misses there, in one younger than the miss interval. found is
// false when both miss. Hits and misses are counted.
func Lookup[S, V any](ctx context.Context, c *Cache[S], find func(S) (V, bool)) (v V, found bool, err error) {
	s, err := c.Get(ctx)
	if err != nil {
		return v, false, err
	}
	if v, ok := find(s); ok {
		c.metrics.hits.Inc()
		return v, true, nil
	}
	if s, err = c.Fresh(ctx, c.cfg.MissInterval); err != nil {
		return v, false, err
	}
	v, found = find(s)
	c.RecordLookup(found)
	return v, found, nil
}

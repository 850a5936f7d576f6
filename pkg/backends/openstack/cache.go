package openstack

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// errServerNotFound means Nova positively answered that a server is gone.
var errServerNotFound = errors.New("server not found")

// serverSource is what the cache needs from Nova.
type serverSource interface {
	// listServers returns every server of the project (one paginated listing).
	listServers(ctx context.Context) ([]*server, error)
	// getServer returns one server, or errServerNotFound on a 404.
	getServer(ctx context.Context, id string) (*server, error)
}

// snapshot is one bulk listing, indexed.
type snapshot struct {
	byID    map[string]*server
	byName  map[string][]*server
	fetched time.Time
}

// serverCache serves lookups from a bulk listing refreshed when older than
// ttl, and on a miss when older than missAfter. Concurrent refreshes are
// merged with singleflight.
type serverCache struct {
	src       serverSource
	ttl       time.Duration
	missAfter time.Duration
	now       func() time.Time

	mu   sync.RWMutex
	snap *snapshot
	sf   singleflight.Group
}

func newServerCache(src serverSource, ttl time.Duration) *serverCache {
	miss := 10 * time.Second
	if ttl < miss {
		miss = ttl
	}
	return &serverCache{src: src, ttl: ttl, missAfter: miss, now: time.Now}
}

// current returns a snapshot no older than maxAge.
func (c *serverCache) current(ctx context.Context, maxAge time.Duration) (*snapshot, error) {
	c.mu.RLock()
	s := c.snap
	c.mu.RUnlock()
	if s != nil && c.now().Sub(s.fetched) < maxAge {
		return s, nil
	}
	return c.refresh(ctx)
}

// refresh lists servers once for all concurrent callers.
func (c *serverCache) refresh(ctx context.Context) (*snapshot, error) {
	ch := c.sf.DoChan("list", func() (any, error) {
		// The listing outlives a caller that gives up: others may wait on it.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*requestTimeout)
		defer cancel()
		list, err := c.src.listServers(lctx)
		if err != nil {
			return nil, err
		}
		s := index(list, c.now())
		c.mu.Lock()
		c.snap = s
		c.mu.Unlock()
		return s, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*snapshot), nil
	}
}

func index(list []*server, now time.Time) *snapshot {
	s := &snapshot{byID: make(map[string]*server, len(list)), byName: make(map[string][]*server, len(list)), fetched: now}
	for _, srv := range list {
		s.byID[srv.ID] = srv
		s.byName[srv.Name] = append(s.byName[srv.Name], srv)
	}
	return s
}

// byID finds a server by ID: from the cache, then a fresher listing, then a
// direct GET, which alone may answer errServerNotFound.
func (c *serverCache) byID(ctx context.Context, id string) (*server, error) {
	s, err := c.current(ctx, c.ttl)
	if err != nil {
		return nil, err
	}
	if srv, ok := s.byID[id]; ok {
		return srv, nil
	}
	if s, err = c.current(ctx, c.missAfter); err != nil {
		return nil, err
	}
	if srv, ok := s.byID[id]; ok {
		return srv, nil
	}
	return c.src.getServer(ctx, id)
}

// byName finds the one server with exactly this name. None is
// errServerNotFound; two or more is an error naming them.
func (c *serverCache) byName(ctx context.Context, name string) (*server, error) {
	s, err := c.current(ctx, c.ttl)
	if err != nil {
		return nil, err
	}
	if len(s.byName[name]) == 0 {
		if s, err = c.current(ctx, c.missAfter); err != nil {
			return nil, err
		}
	}
	switch found := s.byName[name]; len(found) {
	case 0:
		return nil, fmt.Errorf("no server named %q: %w", name, errServerNotFound)
	case 1:
		return found[0], nil
	default:
		ids := make([]string, len(found))
		for i, f := range found {
			ids[i] = f.ID
		}
		return nil, fmt.Errorf("%d servers are named %q (%v): set the node's providerID or rename the servers", len(found), name, ids)
	}
}

// fresh gets one server directly from Nova, bypassing the listing, and
// checks its status as lookups do.
func (c *serverCache) fresh(ctx context.Context, id string) (*server, error) {
	srv, err := c.src.getServer(ctx, id)
	if err != nil {
		return nil, err
	}
	return checkStatus(srv)
}

package openstack

import (
	"context"
	"errors"
	"fmt"
	"time"

	snapcache "github.com/multicloud-ccm/multicloud-ccm/internal/snapshot"
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
	byID   map[string]*server
	byName map[string][]*server
}

// Settings of the server cache.
const (
	// missInterval is the age from which a lookup that misses lists again
	// (capped at the TTL).
	missInterval = 10 * time.Second
	// failureBackoff is how long a failed listing is answered with its
	// error instead of listing again (capped at the TTL).
	failureBackoff = 5 * time.Second
)

// serverCache serves lookups from a bulk listing kept by an
// internal/snapshot cache: refreshed when older than the TTL, and on a miss
// when older than the miss interval; concurrent refreshes are merged; for
// a backoff after a failed listing, lookups get its error instead of
// listing again.
type serverCache struct {
	src   serverSource
	snaps *snapcache.Cache[*snapshot]
}

func newServerCache(backend string, src serverSource, ttl time.Duration) *serverCache {
	c := &serverCache{src: src}
	c.snaps = snapcache.New(snapcache.Config{
		Backend:        backend,
		TTL:            ttl,
		MissInterval:   missInterval,
		FailureBackoff: min(failureBackoff, ttl),
		// The listing outlives a caller that gives up: others may wait on it.
		ListTimeout: 2 * requestTimeout,
	}, c.list)
	return c
}

// list lists and indexes the servers.
func (c *serverCache) list(ctx context.Context) (*snapshot, error) {
	list, err := c.src.listServers(ctx)
	if err != nil {
		return nil, err
	}
	return index(list), nil
}

// current returns a snapshot younger than the TTL.
func (c *serverCache) current(ctx context.Context) (*snapshot, error) {
	return c.snaps.Get(ctx)
}

func index(list []*server) *snapshot {
	s := &snapshot{byID: make(map[string]*server, len(list)), byName: make(map[string][]*server, len(list))}
	for _, srv := range list {
		s.byID[srv.ID] = srv
		s.byName[srv.Name] = append(s.byName[srv.Name], srv)
	}
	return s
}

// byID finds a server by ID: from the cache, then a fresher listing, then a
// direct GET, which alone may answer errServerNotFound.
func (c *serverCache) byID(ctx context.Context, id string) (*server, error) {
	srv, found, err := snapcache.Lookup(ctx, c.snaps, func(s *snapshot) (*server, bool) {
		srv, ok := s.byID[id]
		return srv, ok
	})
	if err != nil || found {
		return srv, err
	}
	return c.src.getServer(ctx, id)
}

// byName finds the one server with exactly this name. None is
// errServerNotFound; two or more is an error naming them.
func (c *serverCache) byName(ctx context.Context, name string) (*server, error) {
	found, _, err := snapcache.Lookup(ctx, c.snaps, func(s *snapshot) ([]*server, bool) {
		return s.byName[name], len(s.byName[name]) > 0
	})
	if err != nil {
		return nil, err
	}
	switch len(found) {
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

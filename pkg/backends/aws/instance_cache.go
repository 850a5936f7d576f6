package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	snapcache "github.com/multicloud-ccm/multicloud-ccm/internal/snapshot"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// Batch sizes of DescribeInstances, AWS's limits.
const (
	// idBatch is how many instance IDs one DescribeInstances names.
	idBatch = 1000
	// filterBatch is how many values one call's filters may hold in all
	// (beyond it EC2 answers FilterLimitExceeded).
	filterBatch = 200
	// listPageSize is the page size of filtered DescribeInstances calls,
	// the largest AWS allows.
	listPageSize = 1000
)

// Settings of the instance cache.
const (
	// missInterval is how long a name or address no instance matched is
	// not asked again.
	missInterval = 5 * time.Second
	// failureBackoff is how long a failed listing is answered with its
	// error instead of listing again (capped at the TTL).
	failureBackoff = 5 * time.Second
	// listTimeout bounds one listing.
	listTimeout = 2 * time.Minute
	// forgetAfter is how long an instance no one asks about stays in the
	// listing (nodes are swept every 5 minutes).
	forgetAfter = 30 * time.Minute
)

// instanceCache serves instance lookups from a listing of the cluster's
// instances, not the VPC's: DescribeInstances naming, 1,000 at a time, the
// instances of the cluster's Nodes (from the Node lister, once the backend
// has one) and every instance a lookup found in the last forgetAfter,
// whatever its VPC. So a sweep costs ⌈nodes/1000⌉ calls however large the
// VPC, and a node in a peered VPC is listed like any other. The listing is
// kept by an internal/snapshot cache: refreshed when older than the TTL,
// concurrent refreshes merged, and for a backoff after a failure lookups
// get its error instead of listing again. An instance the listing lacks is
// asked for directly, together with the other misses of the moment
// (misses), and listed from then on.
type instanceCache struct {
	ec2   EC2API
	vpc   string
	now   func() time.Time
	snaps *snapcache.Cache[*instanceIndex]

	mu sync.Mutex
	// asked holds the instances lookups found, and when last asked for.
	asked map[string]time.Time
	// absent holds the IDs the last listing learnt AWS does not know; they
	// are asked for directly until AWS knows them, as naming one would fail
	// a whole batch.
	absent map[string]bool
	// nodeIDs returns the instance IDs of the cluster's Nodes; nil until
	// the backend has a Node lister.
	nodeIDs func() []string
	// failed is the last direct lookup's failure, and failedAt when: for
	// the failure backoff, direct lookups get it instead of asking again.
	failed   error
	failedAt time.Time
	// misses coalesces the lookups of instances the listing lacks.
	misses *misses
}

// instanceIndex is one listing, indexed. Its maps grow when a direct
// lookup finds an instance (remember); misses records names and addresses
// no instance matched, and when.
type instanceIndex struct {
	mu     sync.RWMutex
	byID   map[string]*ec2types.Instance
	byDNS  map[string]*ec2types.Instance
	byIP   map[string]*ec2types.Instance
	misses map[string]time.Time
}

func newIndex() *instanceIndex {
	return &instanceIndex{byID: map[string]*ec2types.Instance{}, byDNS: map[string]*ec2types.Instance{},
		byIP: map[string]*ec2types.Instance{}, misses: map[string]time.Time{}}
}

func newInstanceCache(backend string, c EC2API, vpc string, ttl time.Duration) *instanceCache {
	ic := &instanceCache{ec2: c, vpc: vpc, now: time.Now, asked: map[string]time.Time{}, absent: map[string]bool{}}
	ic.misses = newMisses(missWindow, ic.describeMisses)
	ic.configure(snapcache.Config{
		Backend:        backend,
		TTL:            ttl,
		MissInterval:   missInterval,
		FailureBackoff: min(failureBackoff, ttl),
		ListTimeout:    listTimeout,
	})
	return ic
}

// configure (re)builds the snapshot cache with cfg, empty.
func (c *instanceCache) configure(cfg snapcache.Config) {
	c.snaps = snapcache.New(cfg, c.list)
}

// setNodeIDs makes every listing name the instances ids returns.
func (c *instanceCache) setNodeIDs(ids func() []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodeIDs = ids
}

// byID returns the instance with the ID, or nil when AWS says there is
// none: from the listing, else asked for with the other misses (misses).
func (c *instanceCache) byID(ctx context.Context, id string) (*ec2types.Instance, error) {
	x, err := c.snaps.Get(ctx)
	if err != nil {
		return nil, err
	}
	if in := x.get(x.byID, id); in != nil {
		c.snaps.RecordLookup(true)
		c.touch(id)
		return in, nil
	}
	c.snaps.RecordLookup(false)
	return c.misses.get(ctx, id)
}

// listed returns the instances of ids as the listing has them, out[i]
// for ids[i] (nil for "" and for one the listing lacks: byID asks AWS for
// those), with one snapshot, one read lock and one touch for them all: an
// NLB's targets are up to 1,000 instances, looked up for every reconcile.
func (c *instanceCache) listed(ctx context.Context, ids []string) ([]*ec2types.Instance, error) {
	out := make([]*ec2types.Instance, len(ids))
	if !slices.ContainsFunc(ids, func(id string) bool { return id != "" }) {
		return out, nil // no EC2 instance among them: nothing to read
	}
	x, err := c.snaps.Get(ctx)
	if err != nil {
		return nil, err
	}
	x.mu.RLock()
	for i, id := range ids {
		if id != "" {
			out[i] = x.byID[id]
		}
	}
	x.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for i, in := range out {
		if in != nil {
			c.snaps.RecordLookup(true)
			c.asked[ids[i]] = now
			delete(c.absent, ids[i])
		}
	}
	return out, nil
}

func (x *instanceIndex) get(m map[string]*ec2types.Instance, key string) *ec2types.Instance {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return m[key]
}

// touch records that the instance was asked for.
func (c *instanceCache) touch(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked[id] = c.now()
	delete(c.absent, id)
}

// wanted returns the IDs a listing names, and forgets the instances no one
// asked about for forgetAfter.
func (c *instanceCache) wanted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := map[string]bool{}
	for id, at := range c.asked {
		if c.now().Sub(at) > forgetAfter {
			delete(c.asked, id)
			continue
		}
		ids[id] = true
	}
	if c.nodeIDs != nil {
		for _, id := range c.nodeIDs() {
			ids[id] = true
		}
	}
	for id := range c.absent {
		if !ids[id] {
			delete(c.absent, id)
		}
	}
	out := make([]string, 0, len(ids))
	for id := range ids {
		if !c.absent[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// list describes the wanted instances, idBatch at a time, and indexes
// them. A batch AWS refuses because one of its instances does not exist
// (or has an ID AWS calls malformed) is described again through the
// instance-id filter, which skips unknown IDs; those are then left out of
// the batches.
func (c *instanceCache) list(ctx context.Context) (*instanceIndex, error) {
	x := newIndex()
	for ids := range slices.Chunk(c.wanted(), idBatch) {
		out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
		if isNotFound(err) || isMalformed(err) {
			err = c.listFiltered(ctx, ids, x)
		} else if err == nil {
			x.add(out.Reservations)
		}
		if err != nil {
			return nil, fmt.Errorf("DescribeInstances: %w", err)
		}
	}
	return x, nil
}

// listFiltered describes ids through the instance-id filter and marks
// those AWS does not list absent.
func (c *instanceCache) listFiltered(ctx context.Context, ids []string, x *instanceIndex) error {
	for part := range slices.Chunk(ids, filterBatch) {
		if err := c.describeFiltered(ctx, x, ec2types.Filter{Name: awssdk.String("instance-id"), Values: part}); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if x.byID[id] == nil {
			c.absent[id] = true
		}
	}
	return nil
}

// describeFiltered pages through DescribeInstances with the filters and
// indexes what it answers.
func (c *instanceCache) describeFiltered(ctx context.Context, x *instanceIndex, fs ...ec2types.Filter) error {
	p := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{MaxResults: awssdk.Int32(listPageSize), Filters: fs})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		x.add(out.Reservations)
	}
	return nil
}

// add indexes the reservations' instances.
func (x *instanceIndex) add(rs []ec2types.Reservation) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range rs {
		for i := range r.Instances {
			index(&r.Instances[i], x.byID, x.byDNS, x.byIP)
		}
	}
}

// index adds an instance to the lookup maps. Terminated instances keep
// their ID (they are positively gone) but not their names or addresses,
// which AWS may already have handed to another instance.
func index(in *ec2types.Instance, ids, dns, ips map[string]*ec2types.Instance) {
	ids[awssdk.ToString(in.InstanceId)] = in
	if in.State != nil && in.State.Name == ec2types.InstanceStateNameTerminated {
		return
	}
	if n := awssdk.ToString(in.PrivateDnsName); n != "" {
		dns[n] = in
	}
	for _, ni := range in.NetworkInterfaces {
		for _, a := range ni.PrivateIpAddresses {
			if ip := awssdk.ToString(a.PrivateIpAddress); ip != "" {
				ips[ip] = in
			}
		}
	}
	if ip := awssdk.ToString(in.PrivateIpAddress); ip != "" {
		ips[ip] = in
	}
}

// describeOne asks AWS directly for one instance, whatever its VPC, and
// lists it from then on. It returns nil only when AWS says the instance
// does not exist; an answer without the instance is an error.
func (c *instanceCache) describeOne(ctx context.Context, id string) (*ec2types.Instance, error) {
	var out *ec2.DescribeInstancesOutput
	err := c.direct(ctx, func() (err error) {
		out, err = c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		return err
	})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("DescribeInstances %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for i := range r.Instances {
			if in := &r.Instances[i]; awssdk.ToString(in.InstanceId) == id {
				c.remember(in)
				return in, nil
			}
		}
	}
	return nil, fmt.Errorf("DescribeInstances %s: the answer does not list the instance", id)
}

// remember adds an instance found by a direct lookup to the listing, so
// the next lookup is served from the cache and the next listing names it.
func (c *instanceCache) remember(in *ec2types.Instance) {
	c.touch(awssdk.ToString(in.InstanceId))
	x, _, ok := c.snaps.Current()
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	index(in, x.byID, x.byDNS, x.byIP)
}

// direct runs a direct lookup, unless one failed less than the failure
// backoff ago: then it returns that failure, so an EC2 that is down is not
// asked once per node. Only EC2's failures are remembered: a call the
// caller's own context ended (its cancellation, its deadline, a budget
// wait that would pass the deadline) says nothing of EC2, and handing it
// to every other lookup would fail them with another caller's deadline.
func (c *instanceCache) direct(ctx context.Context, call func() error) error {
	c.mu.Lock()
	failed, ago := c.failed, c.now().Sub(c.failedAt)
	c.mu.Unlock()
	if failed != nil && ago < c.snaps.Config().FailureBackoff {
		return failed
	}
	err := call()
	if err != nil && (isNotFound(err) || isMalformed(err) || callerEnded(ctx, err)) {
		// An answer about the IDs asked for, or the caller's own end: not
		// about EC2's health.
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed, c.failedAt = err, c.now()
	return err
}

// callerEnded reports whether err is the end of the caller's context ctx
// rather than EC2's answer: ctx is done, or the API budget refused a wait
// that would pass ctx's deadline.
func callerEnded(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, cloudapi.ErrPastDeadline)
}

// forgetFailure forgets recent failures, of the listing and of direct
// lookups, so the next lookup asks AWS without waiting out the backoff.
func (c *instanceCache) forgetFailure() {
	c.snaps.ForgetFailure()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed = nil
}

// Filters matching a private DNS name or address of an instance.
const (
	filterDNS = "private-dns-name"
	filterIP  = "network-interface.addresses.private-ip-address"
)

// byKey returns the VPC's instance whose private DNS name or address
// (index and filter say which) is key, or nil: from the listing, else
// asked for with the filter (unless key missed within missInterval), and
// listed from then on.
func (c *instanceCache) byKey(ctx context.Context, index func(*instanceIndex) map[string]*ec2types.Instance, filter, key string) (*ec2types.Instance, error) {
	x, err := c.snaps.Get(ctx)
	if err != nil {
		return nil, err
	}
	if in := x.get(index(x), key); in != nil || x.missedRecently(filter+"="+key, c.now(), c.snaps.Config().MissInterval) {
		c.snaps.RecordLookup(in != nil)
		return in, nil
	}
	err = c.direct(ctx, func() error {
		return c.describeFiltered(ctx, x, ec2types.Filter{Name: awssdk.String("vpc-id"), Values: []string{c.vpc}},
			ec2types.Filter{Name: awssdk.String(filter), Values: []string{key}})
	})
	if err != nil {
		return nil, fmt.Errorf("DescribeInstances %s=%s: %w", filter, key, err)
	}
	in := x.get(index(x), key)
	c.snaps.RecordLookup(in != nil)
	if in == nil {
		x.missed(filter+"="+key, c.now())
		return nil, nil
	}
	c.touch(awssdk.ToString(in.InstanceId))
	return in, nil
}

func (x *instanceIndex) missedRecently(key string, now time.Time, interval time.Duration) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	at, ok := x.misses[key]
	return ok && now.Sub(at) < interval
}

func (x *instanceIndex) missed(key string, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.misses[key] = now
}

func byDNS(x *instanceIndex) map[string]*ec2types.Instance { return x.byDNS }
func byIP(x *instanceIndex) map[string]*ec2types.Instance  { return x.byIP }

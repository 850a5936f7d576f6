package aws

import (
	"context"
	"fmt"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	snapcache "github.com/multicloud-ccm/multicloud-ccm/internal/snapshot"
)

// listPageSize is the page size of bulk DescribeInstances calls, the
// largest AWS allows.
const listPageSize = 1000

// Settings of the instance cache.
const (
	// missInterval is the age from which a lookup that misses lists again.
	missInterval = 5 * time.Second
	// failureBackoff is how long a failed listing is answered with its
	// error instead of listing again (capped at the TTL).
	failureBackoff = 5 * time.Second
	// listTimeout bounds one paginated listing.
	listTimeout = 2 * time.Minute
)

// instanceCache serves instance lookups from bulk, paginated
// DescribeInstances listings of the VPC, kept by an internal/snapshot
// cache: a listing older than the TTL is refreshed on the next lookup; a
// lookup that misses refreshes it unless it is younger than the miss
// interval; concurrent refreshes are merged; for a backoff after a failed
// listing, lookups get its error instead of listing again.
type instanceCache struct {
	ec2   EC2API
	vpc   string
	snaps *snapcache.Cache[*instanceIndex]
}

// instanceIndex is one listing of the VPC, indexed. Its maps grow when a
// direct lookup finds a new instance of the VPC (remember).
type instanceIndex struct {
	mu    sync.RWMutex
	byID  map[string]*ec2types.Instance
	byDNS map[string]*ec2types.Instance
	byIP  map[string]*ec2types.Instance
}

func newInstanceCache(backend string, c EC2API, vpc string, ttl time.Duration) *instanceCache {
	ic := &instanceCache{ec2: c, vpc: vpc}
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

// lookup finds an instance with key (by ID, private DNS name or private
// IP, as index says), refreshing the listing when stale or on a miss.
func (c *instanceCache) lookup(ctx context.Context, index func(*instanceIndex) map[string]*ec2types.Instance, key string) (*ec2types.Instance, error) {
	in, _, err := snapcache.Lookup(ctx, c.snaps, func(x *instanceIndex) (*ec2types.Instance, bool) {
		x.mu.RLock()
		defer x.mu.RUnlock()
		in := index(x)[key]
		return in, in != nil
	})
	return in, err
}

func byID(x *instanceIndex) map[string]*ec2types.Instance  { return x.byID }
func byDNS(x *instanceIndex) map[string]*ec2types.Instance { return x.byDNS }
func byIP(x *instanceIndex) map[string]*ec2types.Instance  { return x.byIP }

// list pages through DescribeInstances and indexes the instances.
func (c *instanceCache) list(ctx context.Context) (*instanceIndex, error) {
	p := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{
		MaxResults: awssdk.Int32(listPageSize),
		Filters:    []ec2types.Filter{{Name: awssdk.String("vpc-id"), Values: []string{c.vpc}}},
	})
	x := &instanceIndex{byID: map[string]*ec2types.Instance{}, byDNS: map[string]*ec2types.Instance{}, byIP: map[string]*ec2types.Instance{}}
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeInstances: %w", err)
		}
		for _, r := range out.Reservations {
			for i := range r.Instances {
				index(&r.Instances[i], x.byID, x.byDNS, x.byIP)
			}
		}
	}
	return x, nil
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

// describeOne asks AWS directly for one instance, whatever its VPC. It
// returns nil only when AWS says the instance does not exist; an answer
// without the instance is an error.
func (c *instanceCache) describeOne(ctx context.Context, id string) (*ec2types.Instance, error) {
	out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
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

// remember adds an instance found by a direct lookup to the indexes, if it
// belongs to the VPC, so the next lookup of a new instance is served from
// the cache.
func (c *instanceCache) remember(in *ec2types.Instance) {
	if awssdk.ToString(in.VpcId) != c.vpc {
		return
	}
	x, _, ok := c.snaps.Current()
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	index(in, x.byID, x.byDNS, x.byIP)
}

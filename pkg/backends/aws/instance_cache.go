package aws

import (
	"context"
	"fmt"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/sync/singleflight"
)

// listPageSize is the page size of bulk DescribeInstances calls, the
// largest AWS allows.
const listPageSize = 1000

// instanceCache serves instance lookups from bulk, paginated
// DescribeInstances listings of the VPC. A listing older than ttl is
// refreshed on the next lookup; a lookup that misses refreshes it unless it
// is younger than minRefresh. Concurrent refreshes are merged.
type instanceCache struct {
	ec2        EC2API
	vpc        string
	ttl        time.Duration
	minRefresh time.Duration
	now        func() time.Time

	sf      singleflight.Group
	mu      sync.RWMutex
	fetched time.Time
	byID    map[string]*ec2types.Instance
	byDNS   map[string]*ec2types.Instance
	byIP    map[string]*ec2types.Instance
}

func newInstanceCache(c EC2API, vpc string, ttl time.Duration) *instanceCache {
	return &instanceCache{ec2: c, vpc: vpc, ttl: ttl, minRefresh: 5 * time.Second, now: time.Now}
}

// lookup finds an instance with key (by ID, private DNS name or private
// IP, as index says), refreshing the listing when stale or on a miss.
func (c *instanceCache) lookup(ctx context.Context, index func(*instanceCache) map[string]*ec2types.Instance, key string) (*ec2types.Instance, error) {
	age, in := c.get(index, key)
	if in != nil && age < c.ttl {
		return in, nil
	}
	if in == nil && age < c.minRefresh {
		return nil, nil
	}
	if err := c.refresh(ctx); err != nil {
		return nil, err
	}
	_, in = c.get(index, key)
	return in, nil
}

func (c *instanceCache) get(index func(*instanceCache) map[string]*ec2types.Instance, key string) (time.Duration, *ec2types.Instance) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	age := time.Duration(1<<63 - 1)
	if !c.fetched.IsZero() {
		age = c.now().Sub(c.fetched)
	}
	if m := index(c); m != nil {
		return age, m[key]
	}
	return age, nil
}

func byID(c *instanceCache) map[string]*ec2types.Instance  { return c.byID }
func byDNS(c *instanceCache) map[string]*ec2types.Instance { return c.byDNS }
func byIP(c *instanceCache) map[string]*ec2types.Instance  { return c.byIP }

// refresh lists the VPC's instances once, however many callers ask at the
// same time.
func (c *instanceCache) refresh(ctx context.Context) error {
	ch := c.sf.DoChan("list", func() (any, error) {
		return nil, c.list(context.WithoutCancel(ctx))
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return fmt.Errorf("listing instances: %w", ctx.Err())
	}
}

// list pages through DescribeInstances and replaces the indexes.
func (c *instanceCache) list(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	started := c.now()
	p := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{
		MaxResults: awssdk.Int32(listPageSize),
		Filters:    []ec2types.Filter{{Name: awssdk.String("vpc-id"), Values: []string{c.vpc}}},
	})
	ids, dns, ips := map[string]*ec2types.Instance{}, map[string]*ec2types.Instance{}, map[string]*ec2types.Instance{}
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("DescribeInstances: %w", err)
		}
		for _, r := range out.Reservations {
			for i := range r.Instances {
				index(&r.Instances[i], ids, dns, ips)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID, c.byDNS, c.byIP, c.fetched = ids, dns, ips, started
	return nil
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		return
	}
	index(in, c.byID, c.byDNS, c.byIP)
}

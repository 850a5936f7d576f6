package aws

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// missWindow is how long the first lookup the listing missed waits for
// others before they are described together. Misses arriving while a
// DescribeInstances is in flight wait for the next one.
const missWindow = 5 * time.Millisecond

// lookup is the answer to one instance ID: the instance, nil when AWS
// positively says there is none, or an error.
type lookup struct {
	in  *ec2types.Instance
	err error
}

// misses coalesces the lookups of instances the listing lacks (nodes
// registered since the last listing): the IDs missed within missWindow,
// or while a call is in flight, are described in one DescribeInstances
// naming up to idBatch IDs, so 1,000 nodes registering at once cost a
// few calls, not one each. A caller whose context ends stops waiting; the
// call carries on for the others, bounded by listTimeout.
type misses struct {
	window   time.Duration
	describe func(ctx context.Context, ids []string) map[string]lookup

	mu      sync.Mutex
	waiting map[string][]chan lookup
	running bool
}

func newMisses(window time.Duration, describe func(context.Context, []string) map[string]lookup) *misses {
	return &misses{window: window, describe: describe, waiting: map[string][]chan lookup{}}
}

// get returns the instance with the ID, looked up with the other misses.
func (m *misses) get(ctx context.Context, id string) (*ec2types.Instance, error) {
	ch := make(chan lookup, 1)
	m.mu.Lock()
	m.waiting[id] = append(m.waiting[id], ch)
	if !m.running {
		m.running = true
		go m.run() //nolint:gosec // The call serves every waiter, not this caller: it has its own deadline (listTimeout).
	}
	m.mu.Unlock()
	select {
	case r := <-ch:
		return r.in, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("DescribeInstances %s: %w", id, ctx.Err())
	}
}

// run describes the waiting IDs, idBatch at a time, until none waits.
func (m *misses) run() {
	time.Sleep(m.window)
	for {
		ids, waiters := m.take()
		if len(ids) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
		res := m.describe(ctx, ids)
		cancel()
		for i, id := range ids {
			r, ok := res[id]
			if !ok {
				r = lookup{err: fmt.Errorf("DescribeInstances %s: no answer", id)}
			}
			for _, ch := range waiters[i] {
				ch <- r
			}
		}
	}
}

// take removes up to idBatch waiting IDs, or, with none left, ends the
// run.
func (m *misses) take() ([]string, [][]chan lookup) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.waiting) == 0 {
		m.running = false
		return nil, nil
	}
	ids := make([]string, 0, len(m.waiting))
	for id := range m.waiting {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ids = ids[:min(len(ids), idBatch)]
	waiters := make([][]chan lookup, len(ids))
	for i, id := range ids {
		waiters[i] = m.waiting[id]
		delete(m.waiting, id)
	}
	return ids, waiters
}

// describeMisses answers the IDs the listing missed: from the listing if
// a call since has found them, else in one DescribeInstances that also
// names the cluster's Nodes the listing lacks (up to idBatch in all), so
// the nodes registering next are found in the listing.
func (c *instanceCache) describeMisses(ctx context.Context, ids []string) map[string]lookup {
	res := make(map[string]lookup, len(ids))
	x, _, listed := c.snaps.Current()
	var asked []string
	for _, id := range ids {
		if listed {
			if in := x.get(x.byID, id); in != nil {
				c.touch(id)
				res[id] = lookup{in: in}
				continue
			}
		}
		asked = append(asked, id)
	}
	if len(asked) > 0 {
		c.describeBatch(ctx, asked, c.unlisted(x, listed, asked, idBatch-len(asked)), res)
	}
	return res
}

// unlisted returns up to limit instance IDs of the cluster's Nodes that
// the listing x lacks, neither among asked nor known to be absent.
func (c *instanceCache) unlisted(x *instanceIndex, listed bool, asked []string, limit int) []string {
	c.mu.Lock()
	nodeIDs := c.nodeIDs
	c.mu.Unlock()
	if nodeIDs == nil || limit <= 0 {
		return nil
	}
	skip := make(map[string]bool, len(asked))
	for _, id := range asked {
		skip[id] = true
	}
	var out []string
	for _, id := range nodeIDs() {
		if skip[id] || c.isAbsent(id) || (listed && x.get(x.byID, id) != nil) {
			continue
		}
		skip[id] = true
		if out = append(out, id); len(out) == limit {
			break
		}
	}
	return out
}

func (c *instanceCache) isAbsent(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.absent[id]
}

// describeBatch describes asked and extra in one DescribeInstances and
// answers asked. AWS refuses the whole call when one of its IDs does not
// exist (or is malformed): then the IDs are described through the
// instance-id filter, which skips unknown IDs, and an asked ID the filter
// does not list is asked for alone, for only a single-ID DescribeInstances
// saying it does not exist calls an instance gone.
func (c *instanceCache) describeBatch(ctx context.Context, asked, extra []string, res map[string]lookup) {
	names := append(slices.Clone(asked), extra...)
	var out *ec2.DescribeInstancesOutput
	err := c.direct(ctx, func() (err error) {
		out, err = c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: names})
		return err
	})
	switch {
	case err == nil:
		c.answer(asked, c.rememberAll(out.Reservations), res)
	case len(names) == 1 && isNotFound(err):
		res[asked[0]] = lookup{}
	case len(names) > 1 && (isNotFound(err) || isMalformed(err)):
		c.describeSorted(ctx, asked, extra, res)
	default:
		for _, id := range asked {
			res[id] = lookup{err: fmt.Errorf("DescribeInstances %s: %w", id, err)}
		}
	}
}

// answer answers asked from found; an ID the answer does not list is an
// error, never gone.
func (c *instanceCache) answer(asked []string, found map[string]*ec2types.Instance, res map[string]lookup) {
	for _, id := range asked {
		if in := found[id]; in != nil {
			res[id] = lookup{in: in}
		} else {
			res[id] = lookup{err: fmt.Errorf("DescribeInstances %s: the answer does not list the instance", id)}
		}
	}
}

// describeSorted describes a refused batch through the instance-id filter,
// marks the extra IDs AWS does not list absent, and asks for each asked ID
// it does not list alone.
func (c *instanceCache) describeSorted(ctx context.Context, asked, extra []string, res map[string]lookup) {
	x := newIndex()
	err := c.direct(ctx, func() error {
		for part := range slices.Chunk(append(slices.Clone(asked), extra...), filterBatch) {
			if err := c.describeFiltered(ctx, x, ec2types.Filter{Name: awssdk.String("instance-id"), Values: part}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for _, id := range asked {
			res[id] = lookup{err: fmt.Errorf("DescribeInstances %s: %w", id, err)}
		}
		return
	}
	for _, in := range x.byID {
		c.remember(in)
	}
	c.markAbsent(extra, x)
	for _, id := range asked {
		if in := x.byID[id]; in != nil {
			res[id] = lookup{in: in}
			continue
		}
		in, err := c.describeOne(ctx, id)
		res[id] = lookup{in: in, err: err}
	}
}

// markAbsent records the IDs the filtered listing x did not list as
// absent: unknown to AWS, left out of the next batches.
func (c *instanceCache) markAbsent(ids []string, x *instanceIndex) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if x.byID[id] == nil {
			c.absent[id] = true
		}
	}
}

// rememberAll adds the reservations' instances to the listing and returns
// them by ID.
func (c *instanceCache) rememberAll(rs []ec2types.Reservation) map[string]*ec2types.Instance {
	found := map[string]*ec2types.Instance{}
	for _, r := range rs {
		for i := range r.Instances {
			in := &r.Instances[i]
			found[awssdk.ToString(in.InstanceId)] = in
			c.remember(in)
		}
	}
	return found
}

func isMalformed(err error) bool { return errorCode(err) == "InvalidInstanceID.Malformed" }

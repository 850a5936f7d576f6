package backendtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// memCloud is a small in-memory backend that keeps the contract, with
// switches (breaks) that each violate one clause, so the suite can be shown
// to catch every violation. Its providerIDs read mem://<zone>/<id>; it
// serves zone "a". A load balancer is three kinds of part: the load
// balancer, its listener and one member per node; deleting removes the load
// balancer first, as real clouds' cascades do.
type memCloud struct {
	backends.InstancesV2Only
	breaks map[string]bool

	mu        sync.Mutex
	instances map[string]*memInstance
	// powerSeen is the power state last read per instance, the snapshot a
	// "shutdown-stale" backend answers from.
	powerSeen map[string]bool
	outage    bool
	nextID    int
	lbs       map[types.UID]*memLB
	// mutations counts mutating calls; failAfter (>= 0) fails those past it.
	mutations int
	failAfter int
	// strangers are things made beside a load balancer by someone else,
	// by the UID of the Service they sit beside.
	strangers map[types.UID][]string
}

type memInstance struct {
	name       string
	off        bool
	unreadable bool
}

type memLB struct {
	lb, listener bool
	// updated: an Update has run (the first-update-mutates break writes on
	// the first one).
	updated bool
	members map[string]bool
}

func newMemCloud(breaks string) *memCloud {
	c := &memCloud{
		breaks:    map[string]bool{},
		instances: map[string]*memInstance{},
		powerSeen: map[string]bool{},
		lbs:       map[types.UID]*memLB{},
		strangers: map[types.UID][]string{},
		failAfter: -1,
	}
	for _, b := range strings.Split(breaks, ",") {
		if b != "" {
			c.breaks[b] = true
		}
	}
	return c
}

var errOutage = errors.New("mem: service unavailable")

func (c *memCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (c *memCloud) ProviderName() string                                              { return "mem" }
func (c *memCloud) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return c, true }
func (c *memCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return c, true }
func (c *memCloud) Routes() (cloudprovider.Routes, bool)                              { return nil, false }

// lookup finds node's instance: by providerID, else by name (a strong
// match; an address alone is weak and claims nothing unless broken).
func (c *memCloud) lookup(node *corev1.Node) (string, *memInstance, error) {
	if c.outage {
		return "", nil, errOutage
	}
	if node.Spec.ProviderID == "" {
		for id, in := range c.instances {
			if in.name == node.Name || (c.breaks["claim-weak"] && strings.HasPrefix(node.Name, "weak-")) {
				return id, in, nil
			}
		}
		return "", nil, nil
	}
	zone, id, ok := strings.Cut(strings.TrimPrefix(node.Spec.ProviderID, "mem://"), "/")
	if !strings.HasPrefix(node.Spec.ProviderID, "mem://") || !ok || zone == "" || id == "" {
		err := fmt.Errorf("providerID %q is not mem://<zone>/<id>", node.Spec.ProviderID)
		if c.breaks["malformed-plain"] {
			return "", nil, err
		}
		return "", nil, backends.NewUserError(ReasonInvalidProviderID, err)
	}
	if zone != "a" && !c.breaks["foreign-false"] {
		return "", nil, fmt.Errorf("providerID %q: zone %q is not served here", node.Spec.ProviderID, zone)
	}
	in := c.instances[id]
	if in != nil && in.unreadable && !c.breaks["unreadable-false"] {
		return "", nil, fmt.Errorf("instance %s cannot be read", id)
	}
	if in != nil && in.unreadable {
		return id, nil, nil
	}
	return id, in, nil
}

func (c *memCloud) InstanceExists(_ context.Context, node *corev1.Node) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outage && c.breaks["outage-false"] {
		return false, nil
	}
	_, in, err := c.lookup(node)
	return in != nil, err
}

func (c *memCloud) InstanceShutdown(_ context.Context, node *corev1.Node) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, in, err := c.lookup(node)
	if err != nil || in == nil {
		return false, err
	}
	if seen, ok := c.powerSeen[id]; ok && seen && c.breaks["shutdown-stale"] {
		return true, nil
	}
	c.powerSeen[id] = in.off
	return in.off, nil
}

func (c *memCloud) InstanceMetadata(_ context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, in, err := c.lookup(node)
	switch {
	case err != nil:
		return nil, err
	case in == nil && c.breaks["metadata-nil"]:
		return nil, nil
	case in == nil:
		return nil, cloudprovider.InstanceNotFound
	}
	return &cloudprovider.InstanceMetadata{ProviderID: "mem://a/" + id, InstanceType: "small", Zone: "a"}, nil
}

// mutate counts a mutating call and fails it past failAfter.
func (c *memCloud) mutate() error {
	if c.failAfter >= 0 && c.mutations >= c.failAfter {
		return errors.New("mem: crashed")
	}
	c.mutations++
	return nil
}

func (c *memCloud) GetLoadBalancer(_ context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.lbs[svc.UID]
	if l == nil || (c.breaks["get-partial"] && !l.lb) {
		return nil, false, nil
	}
	return memStatus(svc), true, nil
}

func memStatus(svc *corev1.Service) *corev1.LoadBalancerStatus {
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{Hostname: string(svc.UID) + ".mem"}}}
}

func (c *memCloud) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return string(svc.UID)
}

// dryRun, under a dry run (backends.WithDryRun), runs the rest of a call
// on a copy of the load balancers, records each of its mutations as an
// intent and puts everything back when done (the returned function);
// outside one, or with the dry-run-mutates break, it does nothing. c.mu is
// held.
func (c *memCloud) dryRun(ctx context.Context) (restore func()) {
	if !backends.DryRun(ctx) || c.breaks["dry-run-mutates"] {
		return func() {}
	}
	saved, mutations := c.lbs, c.mutations
	c.lbs = map[types.UID]*memLB{}
	for uid, l := range saved {
		cp := *l
		cp.members = map[string]bool{}
		for m := range l.members {
			cp.members[m] = true
		}
		c.lbs[uid] = &cp
	}
	return func() {
		for range c.mutations - mutations {
			backends.RecordIntent(ctx, "mem", "a mutation")
		}
		c.lbs, c.mutations = saved, mutations
	}
}

func (c *memCloud) EnsureLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.dryRun(ctx)()
	l := c.lbs[svc.UID]
	if l == nil || (c.breaks["crash-duplicate"] && !l.listener) {
		if err := c.mutate(); err != nil {
			return nil, err
		}
		if l != nil {
			svc = svc.DeepCopy()
			svc.UID += "-dup"
		}
		l = &memLB{lb: true, members: map[string]bool{}}
		c.lbs[svc.UID] = l
	}
	if err := c.reconcile(l, nodes); err != nil {
		return nil, err
	}
	return memStatus(svc), nil
}

func (c *memCloud) reconcile(l *memLB, nodes []*corev1.Node) error {
	if !l.listener || c.breaks["steady-mutates"] {
		if err := c.mutate(); err != nil {
			return err
		}
		l.listener = true
	}
	for _, n := range nodes {
		if !l.members[n.Name] {
			if err := c.mutate(); err != nil {
				return err
			}
			l.members[n.Name] = true
		}
	}
	return nil
}

func (c *memCloud) UpdateLoadBalancer(_ context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.lbs[svc.UID]
	if l == nil && c.breaks["update-creates"] {
		l = &memLB{lb: true, members: map[string]bool{}}
		c.lbs[svc.UID] = l
	}
	if l == nil {
		return nil
	}
	if !l.updated && c.breaks["first-update-mutates"] {
		if err := c.mutate(); err != nil {
			return err
		}
	}
	l.updated = true
	return c.reconcile(l, nodes)
}

func (c *memCloud) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *corev1.Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.dryRun(ctx)()
	l := c.lbs[svc.UID]
	if l == nil {
		return nil
	}
	if l.lb {
		if err := c.mutate(); err != nil {
			return err
		}
		l.lb = false
	}
	if l.listener {
		if err := c.mutate(); err != nil {
			return err
		}
		l.listener = false
	}
	for m := range l.members {
		if c.breaks["delete-leaves"] {
			break
		}
		if err := c.mutate(); err != nil {
			return err
		}
		delete(l.members, m)
	}
	if len(l.members) == 0 {
		delete(c.lbs, svc.UID)
	}
	if c.breaks["touch-strangers"] {
		delete(c.strangers, svc.UID)
	}
	return nil
}

// addStrangers makes two things beside svc's load balancer that are not
// the backend's, and returns their fingerprint.
func (c *memCloud) addStrangers(svc *corev1.Service) func(*testing.T) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.strangers[svc.UID] = []string{"hand-made-listener", "node-security-group"}
	return func(*testing.T) string {
		c.mu.Lock()
		defer c.mu.Unlock()
		return strings.Join(c.strangers[svc.UID], ",")
	}
}

// parts counts what the cloud holds for the Service and its duplicates.
func (c *memCloud) parts(svc *corev1.Service) (lbs, parts int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, l := range c.lbs {
		if !strings.HasPrefix(string(uid), string(svc.UID)) {
			continue
		}
		if l.lb {
			lbs++
			parts++
		}
		if l.listener {
			parts++
		}
		parts += len(l.members)
	}
	return lbs, parts
}

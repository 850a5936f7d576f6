package lbcontroller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cloudprovider "k8s.io/cloud-provider"
	fakecloud "k8s.io/cloud-provider/fake"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// memberType is a test-only backend type whose load balancers, as
// Octavia's, take as members every node with an InternalIP, whatever its
// labels; it records the nodes each update handed it.
const memberType = "membertest"

var registerMember sync.Once

type memberSettings struct {
	IP string `json:"ip"`
}

type memberCloud struct {
	fakecloud.Cloud
	ip      string
	mu      sync.Mutex
	members map[string][]string
	// ensureDelay, when set, is how long each EnsureLoadBalancer takes (a
	// cloud slowed by its budget); calls logs "ensure NAME" (as the call
	// begins) and "update NAME" in order once logCalls is set.
	ensureDelay time.Duration
	logCalls    bool
	calls       []string
	// refuse, when set, is every EnsureLoadBalancer's and
	// UpdateLoadBalancer's error (a cloud failing).
	refuse error
}

// failWith makes every EnsureLoadBalancer and UpdateLoadBalancer fail
// with err (nil: succeed again).
func (c *memberCloud) failWith(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refuse = err
}

// slow makes each EnsureLoadBalancer take d and starts the call log.
func (c *memberCloud) slow(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ensureDelay, c.logCalls = d, true
}

// callLog returns the calls logged since slow.
func (c *memberCloud) callLog() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

func registerMemberType() {
	registerMember.Do(func() {
		backends.Register(backends.Registration{
			Type: memberType, Scheme: memberType,
			Parse: func(raw []byte, path *field.Path, _ string) (any, field.ErrorList) {
				s := &memberSettings{}
				return s, config.DecodeSection(raw, path, s)
			},
			New: func(_ context.Context, o backends.Options) (cloudprovider.Interface, error) {
				s := o.Settings.(*memberSettings) //nolint:forcetypeassert // the registered parser's type.
				c := &memberCloud{ip: s.IP, members: map[string][]string{}}
				memberClouds.Store(s.IP, c)
				return c, nil
			},
		})
	})
}

// memberClouds are the backends built, by their address.
var memberClouds sync.Map

func (c *memberCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (c *memberCloud) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return nil, false }
func (c *memberCloud) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (c *memberCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return c, true }
func (c *memberCloud) Routes() (cloudprovider.Routes, bool)                              { return nil, false }

// CanTarget: every node with an InternalIP.
func (c *memberCloud) CanTarget(_ *corev1.Service, n *corev1.Node) bool {
	return slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeInternalIP })
}

func (c *memberCloud) GetLoadBalancer(_ context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.members[string(svc.UID)]
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: c.ip}}}, ok, nil
}

func (c *memberCloud) EnsureLoadBalancer(_ context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	c.mu.Lock()
	delay := c.ensureDelay
	if c.logCalls {
		c.calls = append(c.calls, "ensure "+svc.Name)
	}
	c.mu.Unlock()
	time.Sleep(delay)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refuse != nil {
		return nil, c.refuse
	}
	c.members[string(svc.UID)] = nodeNames(nodes)
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: c.ip}}}, nil
}

func (c *memberCloud) UpdateLoadBalancer(_ context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.logCalls {
		c.calls = append(c.calls, "update "+svc.Name)
	}
	if c.refuse != nil {
		return c.refuse
	}
	c.members[string(svc.UID)] = nodeNames(nodes)
	return nil
}

func (c *memberCloud) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *corev1.Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.members, string(svc.UID))
	return nil
}

func (c *memberCloud) membersOf(uid string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(slices.Values(c.members[uid]))
}

// awsAndMembersConfig: the AWS backend (awsConfig's) and a membertest
// backend, both serving classless Services.
const awsAndMembersConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  defaultBackend: aws
backends:
- name: members
  type: ` + memberType + `
  ` + memberType + `: {ip: %[3]s}
` + awsSection

// TestTargetNodeLabelChangeReachesEachBackend: a classless Service served
// by two backends, the AWS backend (IP targets, only the nodes labelled
// pool=web: aws-load-balancer-target-node-labels) and one whose load
// balancer takes every node with an address. worker-1, unlabelled, is a
// member of the second and no target of the NLB; labelled pool=web, it
// must become an NLB target (and stay a member); unlabelled, leave the NLB
// again. The node sync compared the union of the nodes all the Service's
// backends target, which a node targeted by one backend before and by
// both after does not change: the label change updated nothing.
func TestTargetNodeLabelChangeReachesEachBackend(t *testing.T) {
	registerMemberType()
	running, vpcID := runAWSFake(t)
	const memberIP = "203.0.113.77"
	e := startEnv(t, envOptions{
		doc: fmt.Sprintf(awsAndMembersConfig, running.URL, vpcID, memberIP), classless: true,
		nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(h *hookedCloud) Cloud { return routerTargets{h} },
	})
	v, ok := memberClouds.Load(memberIP)
	if !ok {
		t.Fatal("the membertest backend was not built")
	}
	members := v.(*memberCloud) //nolint:forcetypeassert // only memberClouds are stored.
	nodes := e.client.CoreV1().Nodes()
	label := func(name string, set bool) {
		t.Helper()
		n, err := nodes.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if set {
			n.Labels["pool"] = "web"
		} else {
			delete(n.Labels, "pool")
		}
		if _, err := nodes.Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label("worker-0", true)
	if _, err := nodes.Create(context.Background(), utilt.NewNode("worker-1", utilt.WithProviderID("baremetal://worker-1"), utilt.WithInternalIP("10.0.0.11")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.create(t, utilt.NewService("web",
		utilt.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws,members"),
		utilt.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-nlb-target-type", "ip"),
		utilt.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-target-node-labels", "pool=web")))
	var uid string
	state := func(nlb []string, mem []string) func() error {
		return func() error {
			s := e.get(t, "web")
			if len(s.Status.LoadBalancer.Ingress) < 2 {
				return fmt.Errorf("status %v; events %v", s.Status.LoadBalancer.Ingress, e.events(t, "web"))
			}
			uid = string(s.UID)
			if got := ipTargets(running); !slices.Equal(got, nlb) {
				return fmt.Errorf("NLB targets %v, want %v", got, nlb)
			}
			if got := members.membersOf(uid); !slices.Equal(got, mem) {
				return fmt.Errorf("members %v, want %v", got, mem)
			}
			return nil
		}
	}
	both := []string{"worker-0", "worker-1"}
	waitFor(t, time.Minute, "the NLB targeting worker-0 alone, both nodes members", state([]string{"10.0.0.10"}, both))

	label("worker-1", true)
	waitFor(t, 30*time.Second, "worker-1 registered in the NLB once labelled", state([]string{"10.0.0.10", "10.0.0.11"}, both))
	label("worker-1", false)
	waitFor(t, 30*time.Second, "worker-1 deregistered from the NLB once unlabelled", state([]string{"10.0.0.10"}, both))
}

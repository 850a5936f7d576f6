package backendtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// breakEnv names the memCloud breaks a re-executed test binary runs with.
const breakEnv = "BACKENDTEST_BREAK"

// memFixture builds the in-memory backend with the breaks in breakEnv.
func memFixture(*testing.T) *Fixture {
	c := newMemCloud(os.Getenv(breakEnv))
	seq := 0
	newName := func(prefix string) string {
		seq++
		return fmt.Sprintf("%s-%d", prefix, seq)
	}
	set := func(node *corev1.Node, change func(*memInstance)) {
		c.mu.Lock()
		defer c.mu.Unlock()
		change(c.instances[node.Spec.ProviderID[len("mem://a/"):]])
	}
	running := func(*testing.T) *corev1.Node {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.nextID++
		id := fmt.Sprintf("i-%d", c.nextID)
		name := newName("node")
		c.instances[id] = &memInstance{name: name}
		return providerIDNode(name, "mem://a/"+id)
	}
	return &Fixture{
		Cloud:     c,
		Settle:    300 * time.Millisecond,
		Provision: 2 * time.Second,
		Instances: &InstanceHooks{
			Running: running,
			Gone: func(_ *testing.T, node *corev1.Node) {
				c.mu.Lock()
				defer c.mu.Unlock()
				delete(c.instances, node.Spec.ProviderID[len("mem://a/"):])
			},
			Unreadable: func(_ *testing.T, node *corev1.Node) { set(node, func(in *memInstance) { in.unreadable = true }) },
			PowerOff:   func(_ *testing.T, node *corev1.Node) { set(node, func(in *memInstance) { in.off = true }) },
			PowerOn:    func(_ *testing.T, node *corev1.Node) { set(node, func(in *memInstance) { in.off = false }) },
			Outage: func(*testing.T) func() {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.outage = true
				return func() {
					c.mu.Lock()
					defer c.mu.Unlock()
					c.outage = false
				}
			},
			Absent:    func(*testing.T) string { return "mem://a/i-never" },
			Foreign:   func(*testing.T) []string { return []string{"mem://b/i-1"} },
			Malformed: []string{"mem://", "mem://a/", "mem:///i-1"},
			StrongMatch: func(t *testing.T) *corev1.Node {
				n := running(t)
				n.Spec.ProviderID = ""
				return n
			},
			WeakMatch: func(*testing.T) *corev1.Node {
				n := &corev1.Node{}
				n.Name = newName("weak")
				return n
			},
		},
		LoadBalancers: &LoadBalancerHooks{
			Service: func(*testing.T) *corev1.Service {
				svc := &corev1.Service{}
				svc.Name = newName("svc")
				svc.Namespace = "default"
				svc.UID = types.UID(svc.Name + "-uid")
				svc.Spec.Type = corev1.ServiceTypeLoadBalancer
				return svc
			},
			Nodes: func(*testing.T) []*corev1.Node {
				return []*corev1.Node{providerIDNode("n1", "mem://a/n1"), providerIDNode("n2", "mem://a/n2")}
			},
			Mutations: func() int {
				c.mu.Lock()
				defer c.mu.Unlock()
				return c.mutations
			},
			FailMutationsAfter: func(_ *testing.T, n int) func() {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.failAfter = c.mutations + n
				return func() {
					c.mu.Lock()
					defer c.mu.Unlock()
					c.failAfter = -1
				}
			},
			Parts: func(_ *testing.T, svc *corev1.Service) (int, int) { return c.parts(svc) },
			Strangers: func(_ *testing.T, svc *corev1.Service) func(*testing.T) string {
				return c.addStrangers(svc)
			},
		},
	}
}

// TestMemoryBackend runs the suite against the in-memory backend. Run
// plainly it must pass; re-executed by TestSuiteCatchesEachBreak with a
// break set, it must fail.
func TestMemoryBackend(t *testing.T) {
	Run(t, memFixture)
}

// TestSuiteCatchesEachBreak shows that every clause can fail: it re-runs
// TestMemoryBackend with one contract violation at a time and expects the
// named clause to fail.
func TestSuiteCatchesEachBreak(t *testing.T) {
	if os.Getenv(breakEnv) != "" {
		t.Skip("inside a re-executed run")
	}
	cases := map[string]string{
		"unreadable-false":     "instances/unreadable_instance_is_an_error",
		"outage-false":         "instances/outage_is_an_error",
		"foreign-false":        "instances/foreign_providerID_is_an_error",
		"malformed-plain":      "instances/malformed_providerID_is_a_user_error",
		"shutdown-stale":       "instances/shutdown_only_on_fresh_evidence",
		"metadata-nil":         "instances/gone_instance_is_false",
		"claim-weak":           "instances/no-providerID_node_claimed_only_on_a_strong_match",
		"get-partial":          "loadbalancers/crash_between_deletion_steps_is_still_seen",
		"steady-mutates":       "loadbalancers/steady_state_makes_no_mutating_call",
		"crash-duplicate":      "loadbalancers/crash_between_creation_steps_leaves_one_load_balancer",
		"delete-leaves":        "loadbalancers/lifecycle",
		"update-creates":       "loadbalancers/update_never_creates",
		"first-update-mutates": "loadbalancers/a_create_is_converged",
		"touch-strangers":      "loadbalancers/strangers_are_never_changed_or_deleted",
		"dry-run-mutates":      "loadbalancers/a_dry_run_makes_no_mutating_call",
	}
	for brk, clause := range cases {
		t.Run(brk, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMemoryBackend$", "-test.v")
			cmd.Env = append(os.Environ(), breakEnv+"="+brk)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a backend broken with %s:\n%s", brk, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestMemoryBackend/"+clause) {
				t.Errorf("with %s, clause %s did not fail:\n%s", brk, clause, out)
			}
		})
	}
}

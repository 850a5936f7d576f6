package planswitch

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
)

var (
	backendAnn = string(annotation.LoadBalancerBackend)
	drainAnn   = string(annotation.LoadBalancerDrain)
	hcPathAnn  = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-path"
)

// TestPlanMatchesSwitchAcrossClouds: the plan/switch differential through
// the built binary over the AWS wire fake, vcsim and bare metal, for the
// migration paths the table names (the OpenStack ones:
// TestPlanMatchesSwitchOnOpenStack). Each case says what the plan must
// predict (so that the world tests what the table says); then the switch
// must do exactly that (switchAndCompare).
func TestPlanMatchesSwitchAcrossClouds(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 3, 4, false)
	w.nodes = tableNodes(true)
	w.svcs = slices.DeleteFunc(tableServices(), func(s svcCase) bool { return s.onOpenStack() })
	w.build()
	rep, code := w.planWorld()
	w.wantPlanned(rep)
	w.switchAndCompare(rep, code)
}

// TestPlanMatchesSwitchOnOpenStack: the table's OpenStack cases on the real
// Octavia (the OpenStack stack; Nova for nodes with no providerID), in a
// world of their own with the table's nodes but aws-gone (see clockBound:
// Octavia's pace decides how long the switch takes, and no prediction may
// depend on how long that is).
func TestPlanMatchesSwitchOnOpenStack(t *testing.T) {
	t.Parallel()
	requireOpenStackFlag(t)
	w := newWorld(t, 3, 4, true)
	w.nodes = tableNodes(false)
	w.svcs = slices.DeleteFunc(tableServices(), func(s svcCase) bool { return !s.onOpenStack() })
	w.build()
	rep, code := w.planWorld()
	w.wantPlanned(rep)
	w.switchAndCompare(rep, code)
}

// tableNodes are the table's nodes; withClockBound adds aws-gone, whose
// outcome depends on its age (clockBound).
func tableNodes(withClockBound bool) []nodeCase {
	nodes := []nodeCase{
		{name: "aws-ready", cloud: "aws", index: 0, initialised: true, want: plan.NodeClaimed},
		// The aws backend answers "not visible yet" for a gone instance
		// of a node less than 2 minutes old (AWS's eventual consistency):
		// refused, not deleted, until then; the nodes here are seconds old.
		{name: "aws-gone", cloud: "aws", index: 1, initialised: true, notReady: true, instance: "gone", want: plan.NodeError},
		{name: "aws-new", cloud: "aws", index: 2, want: plan.NodeClaimed},
		{name: "vs-new", cloud: "vsphere", index: 0, want: plan.NodeClaimed},
		{name: "vs-gone", cloud: "vsphere", index: 1, initialised: true, notReady: true, instance: "gone", want: plan.NodeDeleted},
		{name: "vs-gone-ready", cloud: "vsphere", index: 2, initialised: true, instance: "gone", want: plan.NodeGoneReady},
		{name: "vs-off", cloud: "vsphere", index: 3, initialised: true, notReady: true, instance: "off", want: plan.NodeClaimed},
		{name: "bm-1", cloud: "metal", initialised: true, want: plan.NodeClaimed},
		{name: "bm-2", cloud: "metal", want: plan.NodeClaimed},
		// Its machine left the inventory (a config change).
		{name: "gone-1", cloud: "metal", initialised: true, notReady: true, want: plan.NodeDeleted},
		{name: "hc-1", cloud: "hcloud", want: plan.NodeOtherCCM},
	}
	if !withClockBound {
		nodes = slices.DeleteFunc(nodes, nodeCase.clockBound)
	}
	return nodes
}

// tableServices are the table's Services, the OpenStack ones included.
func tableServices() []svcCase {
	return []svcCase{
		// cloud-provider-aws's NLB, adopted in place.
		{name: "adopt", upstreamNLB: true, ann: map[string]string{backendAnn: "aws", awsType: "nlb"}, want: plan.LBAdopted},
		// Served before, nothing asked: kept (its targets follow the nodes).
		{name: "kept", served: "aws", want: plan.LBAdopted},
		// The scheme changed: a new NLB, a new DNS name.
		{name: "internal", served: "aws", ann: map[string]string{awsScheme: "internal"}, want: plan.LBReplaced},
		// Moved between clouds: at once, and drained for 10 minutes.
		{name: "moved", served: "aws", ann: map[string]string{backendAnn: "metal"}, want: plan.LBCreated, wantGone: []string{"aws"}},
		{name: "drained", served: "aws", ann: map[string]string{backendAnn: "metal", drainAnn: "10m"}, want: plan.LBCreated, wantGone: []string{"aws"}},
		// The config's default moved from aws to metal.
		{name: "defaulted", served: servedDefault, want: plan.LBCreated, wantGone: []string{"aws"}},
		{name: "up", served: "metal", ann: map[string]string{backendAnn: "aws"}, want: plan.LBCreated, wantGone: []string{"metal"}},
		{name: "both", ann: map[string]string{backendAnn: "aws,metal"}, want: plan.LBCreated},
		{name: "new-aws", ann: map[string]string{backendAnn: "aws"}, want: plan.LBCreated},
		// Leaving MetalLB: its address kept, one outside the pool replaced.
		{name: "metallb", status: "192.0.2.25", want: plan.LBAdopted},
		{name: "outside", status: "198.51.100.7", want: plan.LBReplaced},
		{name: "ghost", ann: map[string]string{backendAnn: "ghost"}, want: plan.LBRefused},
		{name: "path", ann: map[string]string{backendAnn: "aws", hcPathAnn: "healthz"}, local: true, want: plan.LBRefused},
		// Two backends, bare metal refusing the address asked for.
		{name: "partial", ann: map[string]string{backendAnn: "aws,metal", string(annotation.LoadBalancerIPs): "0.0.0.0"}, want: plan.LBRefused},
		// Left to the AWS Load Balancer Controller, and to MetalLB's class.
		{name: "external", ann: map[string]string{backendAnn: "aws", awsType: "external"}, want: plan.LBElsewhere},
		// Two backends, aws leaving it to another controller: bare metal
		// serves it.
		{name: "half-external", ann: map[string]string{backendAnn: "metal,aws", awsType: "external"}, want: plan.LBCreated},
		{name: "classed", class: "metallb.io/metallb", status: "192.0.2.26", want: plan.LBElsewhere},
		// OpenStack (the real Octavia): a new load balancer, one moved to
		// metal and one from aws (not from metal: a bare-metal address
		// released is handed out again in the order of the switch's syncs,
		// which the plan cannot know), settings changed in place (the
		// pool's algorithm, the monitor's retries: its targets follow the
		// nodes too), and a listener replaced (X-Forwarded-For makes it
		// HTTP). Three made before the plan: Octavia makes them one after
		// another, some 15 s each.
		{name: "os-new", ann: map[string]string{backendAnn: "os"}, want: plan.LBCreated},
		{name: "os-left", served: "os", ann: map[string]string{backendAnn: "metal"}, want: plan.LBCreated, wantGone: []string{"os"}},
		{name: "to-os", served: "aws", ann: map[string]string{backendAnn: "os"}, want: plan.LBCreated, wantGone: []string{"aws"}},
		{name: "os-tuned", served: "os", ann: map[string]string{"loadbalancer.openstack.org/lb-method": "LEAST_CONNECTIONS", "loadbalancer.openstack.org/health-monitor-max-retries": "2"}, want: plan.LBAdopted},
		{name: "os-xff", served: "os", ann: map[string]string{"loadbalancer.openstack.org/x-forwarded-for": "true"}, want: plan.LBAdopted},
		// Floating IPs (the backend's floating network is the world's
		// external one: every Service on os has one unless internal): os-new
		// allocates one, os-tuned and os-xff keep theirs, os-left releases
		// its own with its load balancer; one moved away keeping it
		// (disassociated, left), one turned internal (released: its
		// address, the floating IP, goes for the VIP).
		{name: "os-kept-fip", served: "os", ann: map[string]string{backendAnn: "metal", keepFIPAnn: "true"}, want: plan.LBCreated, wantGone: []string{"os"}},
		{name: "os-internal", served: "os", ann: map[string]string{internalAnn: "true"}, want: plan.LBReplaced},
		// A floating IP Neutron refuses on every retry (seed
		// 1796339824651718218): refused before anything is made, bare
		// metal keeps serving it.
		{name: "os-bad-ip", served: "metal", ann: map[string]string{backendAnn: "os", string(annotation.LoadBalancerIPs): "0.0.0.0"}, want: plan.LBRefused},
	}
}

const (
	keepFIPAnn  = "loadbalancer.openstack.org/keep-floatingip"
	internalAnn = "service.beta.kubernetes.io/openstack-internal-load-balancer"
)

// osFlag runs the worlds with OpenStack (the real Octavia):
// TestPlanMatchesSwitchOnOpenStack and
// TestPlanMatchesSwitchRandomWorldOnOpenStack. On by default (make e2e
// starts the stack; without its environment they skip, and fail in CI);
// -planswitch.openstack=false skips them. They once shared their worlds
// with aws-gone, a node the plan rightly refuses ("not visible yet", less
// than 2 minutes old) and the switch deletes once 2 minutes old: on a busy
// machine Octavia's pace made the switch outlast that, and the node's
// deletion (its pool members gone) failed the comparison on timing, not on
// the plan. Worlds with Octavia hold no such node (clockBound).
var osFlag = flag.Bool("planswitch.openstack", true, "run the worlds with the OpenStack stack (its environment: _output/openstack.env): TestPlanMatchesSwitchOnOpenStack and TestPlanMatchesSwitchRandomWorldOnOpenStack")

// requireOpenStackFlag skips the test when -planswitch.openstack=false.
func requireOpenStackFlag(t *testing.T) {
	t.Helper()
	if !*osFlag {
		t.Skip("-planswitch.openstack=false: the worlds with OpenStack are not run")
	}
}

// clockBound reports whether the outcome of the node's case depends on
// the wall clock: an AWS node, not Ready, whose instance is gone is
// refused while less than 2 minutes old (the aws backend's grace for new
// nodes: EC2 is eventually consistent) and deleted by the switch's
// node-lifecycle controller after. The plan sees it young and says
// refused; whether the switch's comparisons come before or after its
// deletion (its targets, its pool members gone) depends on how long the
// switch takes, which Octavia's pace decides, so worlds with Octavia hold
// no such node. Worlds without Octavia take seconds, and do.
func (n nodeCase) clockBound() bool {
	return n.cloud == "aws" && n.instance == "gone" && n.notReady
}

// onOpenStack reports whether the case names the os backend.
func (s svcCase) onOpenStack() bool {
	return slices.Contains(strings.Split(s.served, ","), "os") || slices.Contains(strings.Split(s.ann[backendAnn], ","), "os")
}

var seedFlag = flag.Uint64("planswitch.seed", 0, "seed of the random worlds (TestPlanMatchesSwitchRandomWorld, ...OnOpenStack; 0: from the clock; each test logs the one it used)")

// TestPlanMatchesSwitchRandomWorld: the differential on a world drawn from
// a seed (printed: -planswitch.seed=N draws it again): nodes of every cloud
// initialised or joining, Ready or not, their instances kept, gone or off;
// Services with a history or none, moved, edited, with annotations drawn
// from every backend's, MetalLB's leftovers and upstream NLBs.
func TestPlanMatchesSwitchRandomWorld(t *testing.T) {
	t.Parallel()
	randomWorld(t, false)
}

// TestPlanMatchesSwitchRandomWorldOnOpenStack: the same with OpenStack (the
// real Octavia) among the backends drawn; an AWS node whose instance is
// gone is drawn Ready (clockBound). On with -planswitch.openstack (the
// default), one seed per run.
//
// It was off until session 54. It failed 3 of 6 runs at load 16-41 (seeds
// 1796239464041781550, 1796240106670247103, 1796240686284718747): the
// target group of an NLB the Service leaves (draining in aws, or kept
// while metal refuses the move) kept the targets of before the plan (the
// router's retargetDraining and lbcontroller's retargetFailed fixed it).
// Then seed 1796287371278516815: a Service served by os moved to
// aws,metal with load-balancer-ips 0.0.0.0 (metal refuses it); the Octavia
// load balancer it keeps was updated to the Service as it is now, as
// UpdateLoadBalancer was a whole ensure: its health monitor replaced
// (externalTrafficPolicy Local), its floating IP released "for the
// requested 0.0.0.0". UpdateLoadBalancer now changes pool members only
// (issue #43; pkg/backends/openstack TestUpdateChangesOnlyMembers).
func TestPlanMatchesSwitchRandomWorldOnOpenStack(t *testing.T) {
	t.Parallel()
	requireOpenStackFlag(t)
	randomWorld(t, true)
}

func randomWorld(t *testing.T, withOS bool) {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./test/e2e/planswitch -run '%s$' -planswitch.seed=%d)", seed, t.Name(), seed)
	r := rand.New(rand.NewPCG(seed, 43)) //nolint:gosec // a replayable test world, not a secret.
	w := newWorld(t, 3, 3, withOS)
	w.nodes = randomNodes(r, withOS)
	w.svcs = randomServices(r, withOS)
	for _, s := range w.svcs {
		t.Logf("service %s", s)
	}
	for _, n := range w.nodes {
		t.Logf("node %+v", n)
	}
	defer func() {
		if t.Failed() {
			t.Logf("seed %d failed", seed)
		}
	}()
	w.build()
	rep, code := w.planWorld()
	w.wantPlanned(rep)
	w.switchAndCompare(rep, code)
}

// randomNodes draws a node per AWS instance and VM (initialised or
// joining, Ready or not, the instance kept, gone or, for a VM, off), the
// bare-metal machines bm-1 (initialised or joining) and, at times, a
// machine that left the inventory and a node of another CCM. With withOS
// an AWS node whose instance is gone is Ready (clockBound); the draws are
// the same.
func randomNodes(r *rand.Rand, withOS bool) []nodeCase {
	var out []nodeCase
	for i := range 3 {
		n := nodeCase{name: fmt.Sprintf("aws-%d", i), cloud: "aws", index: i, initialised: r.IntN(5) < 3, notReady: r.IntN(3) == 0}
		if r.IntN(4) == 0 {
			n.instance = "gone"
		}
		if withOS && n.clockBound() {
			n.notReady = false
		}
		out = append(out, n)
	}
	for i := range 3 {
		n := nodeCase{name: fmt.Sprintf("vs-%d", i), cloud: "vsphere", index: i, initialised: r.IntN(5) < 3, notReady: r.IntN(3) == 0}
		n.instance = []string{"", "", "", "gone", "off"}[r.IntN(5)]
		out = append(out, n)
	}
	out = append(out, nodeCase{name: "bm-1", cloud: "metal", initialised: r.IntN(2) == 0})
	if r.IntN(2) == 0 {
		// Its machine leaves the inventory (a config change).
		out = append(out, nodeCase{name: "gone-1", cloud: "metal", initialised: true, notReady: r.IntN(2) == 0})
	}
	if r.IntN(2) == 0 {
		out = append(out, nodeCase{name: "hc-1", cloud: "hcloud"})
	}
	return out
}

// Drawn for random Services: histories (the backend annotation the CCM
// before the plan served them with), plan-time backends (del: the
// annotation removed, the default: metal) and other annotations.
var (
	histories      = []string{"", "", servedDefault, "aws", "metal", "aws,metal", "os"}
	backendsDrawn  = []string{"", del, "aws", "metal", "aws,metal", "metal,aws", "os", "os,metal"}
	extraAnnotated = []map[string]string{
		{awsScheme: "internal"},
		{drainAnn: "10m"},
		{drainAnn: "0"},
		{"service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval": "10"},
		{"service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol": "HTTP", hcPathAnn: "/healthz"},
		{hcPathAnn: "healthz"},
		{awsType: "external"},
		{backendAnn: "ghost"},
		{string(annotation.LoadBalancerIPs): "0.0.0.0"},
		{keepFIPAnn: "true"},
		{internalAnn: "true"},
		{"loadbalancer.openstack.org/lb-method": "SOURCE_IP"},
		{"loadbalancer.openstack.org/x-forwarded-for": "true"},
	}
)

// randomServices draws 4 to 7 Services (with withOS, some on OpenStack).
func randomServices(r *rand.Rand, withOS bool) []svcCase {
	draw := func(from []string) string {
		for {
			if v := from[r.IntN(len(from))]; withOS || !strings.Contains(v, "os") {
				return v
			}
		}
	}
	var out []svcCase
	for i := range 4 + r.IntN(4) {
		s := svcCase{name: fmt.Sprintf("s%d", i), served: draw(histories), ann: map[string]string{}}
		if b := draw(backendsDrawn); b != "" {
			s.ann[backendAnn] = b
		}
		for range r.IntN(3) {
			for k, v := range extraAnnotated[r.IntN(len(extraAnnotated))] {
				s.ann[k] = v
			}
		}
		s.local = r.IntN(4) == 0
		if s.served == "" {
			switch r.IntN(5) {
			case 0:
				s.upstreamNLB = true
				s.ann[backendAnn], s.ann[awsType] = "aws", "nlb"
			case 1:
				s.status = fmt.Sprintf("192.0.2.%d", 20+i)
			case 2:
				s.status = fmt.Sprintf("198.51.100.%d", 20+i)
			}
			if s.ann[backendAnn] == del {
				delete(s.ann, backendAnn)
			}
		}
		out = append(out, s)
	}
	return out
}

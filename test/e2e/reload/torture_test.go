package reload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

const (
	tortureCluster = "e2e-torture"
	tortureNS      = "torture"
	nlbClass       = "multicloud-ccm.io/nlb"
	lateClass      = "multicloud-ccm.io/late"
	lbFinalizer    = "service.kubernetes.io/load-balancer-cleanup"
	backendAnn     = "multicloud-ccm.io/load-balancer-backend"
)

var (
	metalPool  = netip.MustParsePrefix("192.0.2.0/26")
	metal2Pool = netip.MustParsePrefix("198.51.100.0/28")
)

// tortureConfig is one state of the cloud-config the torture test edits.
type tortureConfig struct {
	// metal2: a second bare-metal backend, which no Service uses, is
	// configured (added and removed: generations come and go).
	metal2 bool
	// late: the class lateClass (bare metal) is listed.
	late bool
	// def is loadBalancer.defaultBackend.
	def string
	// key is the credential generation in the files ak and secretFile.
	key int
}

func (c tortureConfig) render(awsURL, vpc string) string {
	classes := `[{name: ` + nlbClass + `, backend: aws}`
	if c.late {
		classes += `, {name: ` + lateClass + `, backend: metal}`
	}
	classes += "]"
	doc := `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: ` + tortureCluster + `
loadBalancer:
  defaultBackend: ` + c.def + `
  classes: ` + classes + `
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: bm-1, addresses: [{type: InternalIP, address: 10.0.0.11}]}, {name: bm-2, addresses: [{type: InternalIP, address: 10.0.0.12}]}, {name: bm-3, addresses: [{type: InternalIP, address: 10.0.0.13}]}]
    addressPools: [{name: public, addresses: ["` + metalPool.String() + `"]}]
` + fmt.Sprintf(`- name: aws
  type: aws
  aws:
    region: %s
    vpc: %s
    endpoints: {ec2: %q, elbv2: %q, sts: %q}
    credentials:
      accessKeyID: {file: ak}
      secretAccessKey: {file: %s}
    instanceCacheTTL: 1s
    retry: {maxAttempts: 3, maxBackoff: 100ms}
`, region, vpc, awsURL, awsURL, awsURL, c.secretFile())
	if c.metal2 {
		doc += `- name: metal2
  type: baremetal
  baremetal:
    inventory: [{name: bm-9, addresses: [{type: InternalIP, address: 10.0.9.9}]}]
    addressPools: [{name: spare, addresses: ["` + metal2Pool.String() + `"]}]
`
	}
	return doc
}

func accessKey(gen int) string { return "AKIDGEN" + strconv.Itoa(gen) }

// secretFile is the file holding the secret key: its name changes with
// every rotation, so a rotation is an edit that adds a referenced file
// (applied once, not twice).
func (c tortureConfig) secretFile() string { return "sk-" + strconv.Itoa(c.key) }

// kind is how a torture Service is routed.
type kind struct {
	prefix string
	// tweak makes the Service of this kind.
	tweak framework.ServiceTweak
	// backend its rules name; "" for loadBalancer.defaultBackend, which
	// the test changes: such a Service moves with the default, like an
	// annotation change (docs/routing.md), so it ends in the last one.
	backend string
}

var kinds = []kind{
	{"m", framework.WithAnnotation(backendAnn, "metal"), "metal"},
	{"a", framework.WithAnnotation(backendAnn, "aws"), "aws"},
	{"d", func(*corev1.Service) {}, ""},
	{"n", framework.WithLoadBalancerClass(nlbClass), "aws"},
	{"l", framework.WithLoadBalancerClass(lateClass), "metal"},
	// p: of the class the edits add, created before and never touched:
	// served only because the reload adding the class re-syncs them.
	{"p", framework.WithLoadBalancerClass(lateClass), "metal"},
}

// untouched is the kind the churn leaves alone.
const untouched = "p"

// tortureNames are the Services' names: three of each kind.
func tortureNames() map[string]kind {
	out := map[string]kind{}
	for _, k := range kinds {
		for i := range 3 {
			out[fmt.Sprintf("%s-%d", k.prefix, i)] = k
		}
	}
	return out
}

// TestReloadTorture edits the cloud-config every few seconds (credential
// rotated, backend added and removed, class added and removed, default
// changed) while Services are created, edited, deleted and re-created under
// the same name (their finalizer removed by hand) and bare-metal Nodes
// come and go. At the end every live Service has exactly one load balancer,
// in the backend its rules name, every deleted one has none left in any
// cloud, no address is held twice, no Node was deleted by the CCM, and the
// CloudConfigReloaded events and reloads_total match the edits one for one.
func TestReloadTorture(t *testing.T) {
	cp := framework.StartControlPlaneT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tortureNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	fake := awsfake.New(region)
	seeded := fake.Seed(awsfake.SeedSpec{ClusterID: tortureCluster, Instances: 2})
	fake.SetAccessKeys(accessKey(0))
	running, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = running.Close() }()

	m := &mount{dir: t.TempDir()}
	cfg := tortureConfig{def: "metal"}
	writeConfig := func(c tortureConfig) {
		m.write(t, map[string]string{
			"cloud-config.yaml": c.render(running.URL, seeded.VPCID),
			"ak":                accessKey(c.key), c.secretFile(): "secret-" + strconv.Itoa(c.key),
		})
	}
	writeConfig(cfg)
	configPath := filepath.Join(m.dir, "cloud-config.yaml")
	ccm := cp.StartCCMT(t, framework.CCMOptions{
		Name: "torture",
		ExtraArgs: []string{
			"--cloud-config=" + configPath,
			"--cloud-config-reload-period=500ms",
		},
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(ccm.Logs(framework.LogLines))
			t.Logf("AWS calls: %v", fake.CallCounts())
		}
	})
	framework.Eventually(t, settle, "config metrics", metricIs(ctx, t, ccm, "multicloud_ccm_config_last_reload_successful", "1"))

	// Nodes that stay: the AWS instances and bm-1.
	kept := []string{"bm-1"}
	for _, in := range seeded.Instances {
		node := framework.NewNode(in.PrivateDNSName, framework.WithProviderID(fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)))
		if _, err := framework.CreateNode(ctx, cp.Client, node); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, node.Name)
	}
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("bm-1", framework.WithProviderID("baremetal://bm-1"))); err != nil {
		t.Fatal(err)
	}

	// Services of the class the edits add, Pending until then.
	for name, k := range tortureNames() {
		if k.prefix == untouched {
			if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService(tortureNS, name, k.tweak)); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The churn runs until the edits are done.
	churnCtx, stopChurn := context.WithCancel(ctx)
	var wg sync.WaitGroup
	ch := &churner{t: t, c: cp.Client, names: tortureNames(), rnd: rand.New(rand.NewPCG(24, 1))}
	wg.Go(func() { ch.services(churnCtx) })
	nodes := &nodeChurn{c: cp.Client, present: map[string]bool{}}
	wg.Go(func() { nodes.run(churnCtx) })

	// The edits, one at a time, each applied before the next.
	edits := []struct {
		what   string
		change func(*tortureConfig)
	}{
		{"credential rotated", func(c *tortureConfig) { c.key++ }},
		{"backend added", func(c *tortureConfig) { c.metal2 = true }},
		{"class added", func(c *tortureConfig) { c.late = true }},
		{"default changed to aws", func(c *tortureConfig) { c.def = "aws" }},
		{"credential rotated", func(c *tortureConfig) { c.key++ }},
		{"class removed", func(c *tortureConfig) { c.late = false }},
		{"backend removed", func(c *tortureConfig) { c.metal2 = false }},
		{"default changed to metal", func(c *tortureConfig) { c.def = "metal" }},
		{"class added again", func(c *tortureConfig) { c.late = true }},
		{"credential rotated", func(c *tortureConfig) { c.key++ }},
	}
	start := time.Now()
	for i, e := range edits {
		next := cfg
		e.change(&next)
		if next.key != cfg.key {
			fake.SetAccessKeys(accessKey(cfg.key), accessKey(next.key)) // the new key first, as in IAM
		}
		writeConfig(next)
		framework.Eventually(t, applyWithin, fmt.Sprintf("edit %d (%s) applied", i+1, e.what),
			metricIs(ctx, t, ccm, `multicloud_ccm_config_reloads_total{result="success"}`, strconv.Itoa(i+1)))
		if next.key != cfg.key {
			fake.SetAccessKeys(accessKey(next.key)) // the old key deactivated
		}
		cfg = next
		t.Logf("%v: edit %d applied: %s", time.Since(start).Round(time.Millisecond), i+1, e.what)
		time.Sleep(3 * time.Second) // the churn goes on under this configuration
	}
	stopChurn()
	wg.Wait()
	t.Logf("churn: %s; nodes: %d changes", ch.summary(), nodes.changes)

	// Every Service still being deleted finishes; every live one is
	// served and each holds exactly one load balancer where its rules say.
	ch.def = cfg.def
	framework.Eventually(t, 90*time.Second, "every Service converged", func(ctx context.Context) (bool, string, error) {
		problems, err := ch.check(ctx, fake, ccm, t)
		if err != nil {
			return false, "", err
		}
		return len(problems) == 0, strings.Join(problems, "; "), nil
	})
	t.Logf("at the end: %s", ch.final(ctx, fake))

	for _, name := range append(kept, nodes.live()...) {
		if _, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("node %s: %v (the CCM deleted a node)", name, err)
		}
	}
	if got := metric(ctx, t, ccm, `multicloud_ccm_config_reloads_total{result="success"}`); got != strconv.Itoa(len(edits)) {
		t.Errorf("reloads_total{result=success} = %s after %d edits", got, len(edits))
	}
	if got := metric(ctx, t, ccm, `multicloud_ccm_config_reloads_total{result="failure"}`); got != "" && got != "0" {
		t.Errorf("reloads_total{result=failure} = %s", got)
	}
	framework.Eventually(t, settle, "one CloudConfigReloaded event per edit", func(ctx context.Context) (bool, string, error) {
		n, err := reloadEvents(ctx, cp.Client, configPath)
		return n == len(edits), fmt.Sprintf("%d events for %d edits", n, len(edits)), err
	})
}

// reloadEvents counts the CloudConfigReloaded events naming the config.
func reloadEvents(ctx context.Context, c kubernetes.Interface, path string) (int, error) {
	evs, err := framework.Events(ctx, c, "Namespace", "", "kube-system")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range evs {
		if e.Reason == "CloudConfigReloaded" && strings.Contains(e.Message, path) {
			n += int(max(e.Count, 1))
		}
	}
	return n, nil
}

// churner creates, edits, deletes and re-creates the torture Services.
type churner struct {
	t     *testing.T
	c     kubernetes.Interface
	names map[string]kind
	rnd   *rand.Rand
	// def is the defaultBackend of the configuration in force at the end.
	def string

	mu     sync.Mutex
	counts map[string]int
}

func (ch *churner) count(op string) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.counts == nil {
		ch.counts = map[string]int{}
	}
	ch.counts[op]++
}

func (ch *churner) summary() string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	keys := make([]string, 0, len(ch.counts))
	for k := range ch.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, ch.counts[k]))
	}
	return strings.Join(parts, ", ")
}

func (ch *churner) services(ctx context.Context) {
	names := make([]string, 0, len(ch.names))
	for n, k := range ch.names {
		if k.prefix != untouched {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for ctx.Err() == nil {
		name := names[ch.rnd.IntN(len(names))]
		if err := ch.step(ctx, name); err != nil && ctx.Err() == nil {
			ch.t.Errorf("churning %s: %v", name, err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(150 * time.Millisecond):
		}
	}
}

// step acts on one Service: created when absent, else edited, deleted, or
// deleted and re-created at once (its finalizer removed by hand first).
func (ch *churner) step(ctx context.Context, name string) error {
	svcs := ch.c.CoreV1().Services(tortureNS)
	cur, err := svcs.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		ch.count("create")
		_, err = framework.CreateService(ctx, ch.c, framework.NewLoadBalancerService(tortureNS, name, ch.names[name].tweak))
		return ignoreRace(err)
	case err != nil:
		return err
	case cur.DeletionTimestamp != nil:
		return nil // being deleted: its cleanup is in progress
	}
	switch ch.rnd.IntN(4) {
	case 0, 1:
		ch.count("edit")
		if len(cur.Spec.Ports) == 1 {
			cur.Spec.Ports = append(cur.Spec.Ports, corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443})
		} else {
			cur.Spec.Ports = cur.Spec.Ports[:1]
		}
		_, err = svcs.Update(ctx, cur, metav1.UpdateOptions{})
		return ignoreRace(err)
	case 2:
		ch.count("delete")
		return ignoreRace(svcs.Delete(ctx, name, metav1.DeleteOptions{}))
	default:
		ch.count("re-create")
		return ch.recreate(ctx, cur)
	}
}

// recreate removes the cleanup finalizers (upstream's shared one, and
// ours on a classed Service) by hand, deletes the Service and
// creates it again under the same name at once.
func (ch *churner) recreate(ctx context.Context, cur *corev1.Service) error {
	svcs := ch.c.CoreV1().Services(tortureNS)
	if slices.Contains(cur.Finalizers, lbFinalizer) || slices.Contains(cur.Finalizers, lbcontroller.Finalizer) {
		cur.Finalizers = slices.DeleteFunc(slices.Clone(cur.Finalizers), func(f string) bool { return f == lbFinalizer || f == lbcontroller.Finalizer })
		if _, err := svcs.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return ignoreRace(err)
		}
	}
	uid := cur.UID
	if err := svcs.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		return ignoreRace(err)
	}
	_, err := framework.CreateService(ctx, ch.c, framework.NewLoadBalancerService(tortureNS, cur.Name, ch.names[cur.Name].tweak))
	return ignoreRace(err)
}

// ignoreRace drops the errors of a step racing the CCM's own writes (a
// conflict, the object gone or still there): the next step goes on.
func ignoreRace(err error) error {
	if err == nil || apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) {
		return nil
	}
	var se *apierrors.StatusError
	if errors.As(err, &se) && se.ErrStatus.Reason == metav1.StatusReasonConflict {
		return nil
	}
	return err
}

// check returns what is not yet as it must end: every Service served,
// each with exactly one load balancer in the backend its rules name, none
// for any other name, no address held twice, the pool's in-use metric
// matching the addresses shown.
func (ch *churner) check(ctx context.Context, fake *awsfake.Server, ccm *framework.CCM, t *testing.T) ([]string, error) {
	list, err := ch.c.CoreV1().Services(tortureNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	live := map[string]*corev1.Service{}
	var problems []string
	for i := range list.Items {
		s := &list.Items[i]
		if s.DeletionTimestamp != nil {
			problems = append(problems, s.Name+" still being deleted")
			continue
		}
		live[s.Name] = s
	}
	nlbs := map[string][]awsfake.LoadBalancerView{}
	for _, lb := range fake.LoadBalancers() {
		svc := lb.Tags["kubernetes.io/service-name"]
		nlbs[svc] = append(nlbs[svc], lb)
	}
	for key, lbs := range nlbs {
		name, ok := strings.CutPrefix(key, tortureNS+"/")
		if !ok || live[name] == nil {
			problems = append(problems, fmt.Sprintf("%d NLBs left for %s, which is gone", len(lbs), key))
		}
	}
	ips := map[string]string{}
	metalIPs := 0
	for name, s := range live {
		k := ch.names[name]
		in := s.Status.LoadBalancer.Ingress
		if len(in) != 1 {
			problems = append(problems, fmt.Sprintf("%s: ingress %v", name, in))
			continue
		}
		inAWS := nlbs[tortureNS+"/"+name]
		got := "metal"
		if in[0].Hostname != "" {
			got = "aws"
		}
		if got == "metal" {
			ip, err := netip.ParseAddr(in[0].IP)
			if err != nil || !metalPool.Contains(ip) {
				problems = append(problems, fmt.Sprintf("%s: address %q outside metal's pool", name, in[0].IP))
			}
			if other, dup := ips[in[0].IP]; dup {
				problems = append(problems, fmt.Sprintf("%s and %s both hold %s", name, other, in[0].IP))
			}
			ips[in[0].IP] = name
			metalIPs++
		}
		want := k.backend
		if want == "" {
			want = ch.def
		}
		if got != want {
			problems = append(problems, fmt.Sprintf("%s: served by %s, its rules name %s", name, got, want))
		}
		switch {
		case want == "aws" && (len(inAWS) != 1 || inAWS[0].DNSName != in[0].Hostname):
			problems = append(problems, fmt.Sprintf("%s: %d NLBs (want one, named in its status %s)", name, len(inAWS), in[0].Hostname))
		case want == "metal" && len(inAWS) != 0:
			problems = append(problems, fmt.Sprintf("%s: served by metal, but %d NLBs left", name, len(inAWS)))
		}
	}
	inUse := metric(ctx, t, ccm, `multicloud_ccm_baremetal_addresses_in_use_total{backend="metal",family="IPv4",pool="public"}`)
	if inUse != strconv.Itoa(metalIPs) {
		problems = append(problems, fmt.Sprintf("metal's pool has %s addresses in use, %d Services show one", inUse, metalIPs))
	}
	sort.Strings(problems)
	return problems, nil
}

// final describes the live Services by where they are served.
func (ch *churner) final(ctx context.Context, fake *awsfake.Server) string {
	list, err := ch.c.CoreV1().Services(tortureNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	metal, aws := 0, 0
	for _, s := range list.Items {
		if in := s.Status.LoadBalancer.Ingress; len(in) == 1 && in[0].Hostname != "" {
			aws++
		} else {
			metal++
		}
	}
	return fmt.Sprintf("%d live Services (%d in metal, %d in aws), %d NLBs in the AWS fake", len(list.Items), metal, aws, len(fake.LoadBalancers()))
}

// nodeChurn creates and deletes the bare-metal Nodes bm-2 and bm-3.
type nodeChurn struct {
	c       kubernetes.Interface
	mu      sync.Mutex
	present map[string]bool
	changes int
}

func (n *nodeChurn) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		name := "bm-" + strconv.Itoa(2+i%2)
		n.mu.Lock()
		here := n.present[name]
		n.mu.Unlock()
		var err error
		if here {
			err = n.c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		} else {
			_, err = framework.CreateNode(ctx, n.c, framework.NewNode(name, framework.WithProviderID("baremetal://"+name)))
		}
		if err == nil {
			n.mu.Lock()
			n.present[name] = !here
			n.changes++
			n.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// live lists the churned Nodes that exist.
func (n *nodeChurn) live() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for name, here := range n.present {
		if here {
			out = append(out, name)
		}
	}
	return out
}

package scale

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// cell is one size of one cloud.
type cell struct {
	cloud           string
	nodes, services int
	// ipTargets: on aws, the NLBs target the nodes' addresses
	// (aws-load-balancer-nlb-target-type: ip), not their instances.
	ipTargets bool
}

func (c cell) String() string {
	cloud := c.cloud
	if c.ipTargets {
		cloud += "-ip"
	}
	return fmt.Sprintf("%s-n%d-s%d", cloud, c.nodes, c.services)
}

// awsIPTargets reads SCALE_AWS_TARGET_TYPE: instance (the default) or ip.
func awsIPTargets(t *testing.T) bool {
	switch v := os.Getenv("SCALE_AWS_TARGET_TYPE"); v {
	case "", "instance":
		return false
	case "ip":
		return true
	default:
		t.Fatalf("SCALE_AWS_TARGET_TYPE: %q is neither instance nor ip", v)
		return false
	}
}

// result is one cell's figures.
type result struct {
	cell                   cell
	initTime               time.Duration
	addrP50, addrP99, addr time.Duration
	syncLatency            time.Duration
	syncDone, syncOf       int
	syncEvents             int // UpdatedLoadBalancer events seen
	churnInit, churnSettle time.Duration
	// churnWrong: the target groups whose targets were not the nodes'
	// when the CCM's log was quiet after the churn; churnRight: the time
	// from the churn's start until every group's were (targetsRight).
	churnWrong  int
	churnRight  time.Duration
	churned     int
	phases      []phase
	nodeChanges map[string]map[string]int // phase -> change kind -> count
	peakRSS     float64
	load        string
	// retuned is the CCM's reload line when SCALE_AWS_RATE_LIMITS_SYNC
	// switched the budget before the node sync; syncWaits, the time its
	// requests waited for the budget during the node sync, by api.
	retuned   string
	syncWaits string
	// profiles is, by phase, the CCM's CPU split by package from the
	// profiles SCALE_CCM_PROFILE asked for.
	profiles map[string]string
}

func (r *result) phase(name string) phase {
	for _, p := range r.phases {
		if p.name == name {
			return p
		}
	}
	return phase{dur: time.Minute}
}

func envList(name, def string) []string {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	return strings.Split(v, ",")
}

func envInts(t *testing.T, name, def string) []int {
	var out []int
	for _, s := range envList(name, def) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			t.Fatalf("%s: %q is not a positive count", name, s)
		}
		out = append(out, n)
	}
	return out
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// TestScale runs every cell of SCALE_CLOUDS × SCALE_NODES × SCALE_SERVICES
// and prints the table. Only with SCALE_BENCH=1.
func TestScale(t *testing.T) {
	if os.Getenv("SCALE_BENCH") != "1" {
		t.Skip("the scale benchmark runs with SCALE_BENCH=1 (make bench-scale); it takes minutes to hours")
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("SCALE_OUT")
	if out == "" {
		out = filepath.Join(root, "_output", "scale")
	}
	var results []*result
	for _, cloud := range envList("SCALE_CLOUDS", "baremetal,aws") {
		for _, n := range envInts(t, "SCALE_NODES", "100,1000,5000") {
			for _, s := range envInts(t, "SCALE_SERVICES", "1000,5000") {
				c := cell{cloud: strings.TrimSpace(cloud), nodes: n, services: s}
				c.ipTargets = c.cloud == "aws" && awsIPTargets(t)
				t.Run(c.String(), func(t *testing.T) {
					dir := filepath.Join(out, fmt.Sprintf("%s-%s", c, time.Now().UTC().Format("20060102T150405")))
					r := runCell(t, c, dir)
					results = append(results, r)
					report := table(results)
					t.Log("\n" + report)
					_ = os.WriteFile(filepath.Join(dir, "table.txt"), []byte(table([]*result{r})+"\n"+details(r)), 0o600)
				})
			}
		}
	}
	report := table(results)
	fmt.Println(report)
	for _, r := range results {
		fmt.Println(details(r))
	}
	_ = os.WriteFile(filepath.Join(out, "table.txt"), []byte(report), 0o600)
}

// runCell measures one cell: initialise the nodes, address the Services,
// exclude one node, churn, then a quiet window.
func runCell(t *testing.T, c cell, dir string) *result {
	cl := startCluster(t, c, dir)
	cl.startCCM(t)
	ctx := context.Background()
	r := &result{cell: c, nodeChanges: map[string]map[string]int{}, profiles: map[string]string{}}
	p := newProbe(cl)
	var prof *ccmProfiler
	nw := watchNodes(ctx, t, cl.client)
	defer nw.stop()
	steady := envDuration(t, "SCALE_STEADY", time.Minute)
	timeout := envDuration(t, "SCALE_SYNC_TIMEOUT", 5*time.Minute)

	record := func(name string) {
		ph := p.end(name)
		r.phases = append(r.phases, ph)
		r.nodeChanges[name] = nw.take()
		t.Logf("%s: %s", name, describe(ph))
		if files, err := prof.end(); err != nil {
			t.Logf("%s: the CCM's CPU profile: %v", name, err)
		} else if len(files) > 0 {
			per := map[string]int{"init": c.nodes, "services": c.services, "node sync": max(r.syncOf, 1), "churn": max(r.churned, 1), "steady": 1}[name]
			by, incl, total, err := profileSplit(files)
			if err != nil {
				t.Logf("%s: the CCM's CPU profile: %v", name, err)
			} else {
				r.profiles[name] = formatSplit(by, incl, total, ph.cpu, per)
				t.Logf("%s: the CCM's CPU (%d profiles in %s):\n%s", name, len(files), dir, r.profiles[name])
			}
		}
		prof = nil
	}
	// Node initialisation.
	p.begin()
	prof = profileCCM(cl, dir, "init")
	nw.take()
	r.initTime = createNodes(ctx, t, cl, allIndexes(c.nodes))
	record("init")
	quiet(t, cl, timeout)
	// Services: time to address.
	p.begin()
	prof = profileCCM(cl, dir, "services")
	r.addrP50, r.addrP99, r.addr = addressServices(ctx, t, cl.client, c.services, envDuration(t, "SCALE_ADDRESS_TIMEOUT", 30*time.Minute), cl.serviceTweaks()...)
	record("services")
	quiet(t, cl, timeout)
	if os.Getenv("SCALE_STOP_AFTER") == "services" {
		return finishCell(cl, r)
	}
	// Node sync: one node excluded, under the budget SCALE_AWS_RATE_LIMITS_SYNC
	// switches to when set.
	var waits map[string]float64
	if limits, ok := syncRateLimits(); ok && c.cloud == "aws" {
		r.retuned = retuneBudget(ctx, t, cl, limits)
		t.Logf("budget for the node sync: %s", r.retuned)
		quiet(t, cl, timeout)
	}
	if c.cloud == "aws" {
		waits = budgetWaits(ctx, t, cl)
	}
	p.begin()
	prof = profileCCM(cl, dir, "node sync")
	nw.take()
	// A bare-metal load balancer targets no node (the speakers announce its
	// address): an excluded node must update none of them.
	r.syncOf = c.services
	if c.cloud == "baremetal" {
		r.syncOf = 0
	}
	r.syncLatency, r.syncDone, r.syncEvents = excludeOne(ctx, t, cl, timeout, r.syncOf)
	quiet(t, cl, timeout)
	if c.cloud == "aws" {
		r.syncWaits = waitsSince(waits, budgetWaits(ctx, t, cl))
	}
	record("node sync")
	// Churn: 10 % of the nodes deleted and registered again.
	frac := 0.1
	if v := os.Getenv("SCALE_CHURN"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			t.Fatalf("SCALE_CHURN: %q is not a fraction in (0, 1]", v)
		}
		frac = f
	}
	p.begin()
	prof = profileCCM(cl, dir, "churn")
	nw.take()
	r.churned, r.churnInit = churn(ctx, t, cl, frac)
	churnStart := p.start
	quiet(t, cl, timeout)
	r.churnSettle = time.Since(churnStart)
	if cl.fake != nil && !c.ipTargets {
		r.churnWrong, r.churnRight = targetsRight(ctx, t, cl, churnStart, timeout)
	}
	record("churn")
	// Steady state.
	p.begin()
	prof = profileCCM(cl, dir, "steady")
	nw.take()
	time.Sleep(steady)
	record("steady")
	return finishCell(cl, r)
}

// finishCell records the CCM's peak RSS and the machine's load.
func finishCell(cl *cluster, r *result) *result {
	r.peakRSS = peakRSSMiB(cl.ccm.PID())
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.load = strings.Join(strings.Fields(string(raw))[:3], " ")
	}
	return r
}

func allIndexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// parallel runs fn for every index on 32 goroutines.
func parallel(idx []int, fn func(i int)) {
	var wg sync.WaitGroup
	work := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range work {
				fn(i)
			}
		})
	}
	for _, i := range idx {
		work <- i
	}
	close(work)
	wg.Wait()
}

// createNodes registers the nodes idx and returns the time until every
// one of them is initialised (no uninitialized taint, a providerID) and
// Ready (kwok).
func createNodes(ctx context.Context, t *testing.T, cl *cluster, idx []int) time.Duration {
	t.Helper()
	start := time.Now()
	parallel(idx, func(i int) {
		if _, err := cl.client.CoreV1().Nodes().Create(ctx, cl.nodeOf(i), metav1.CreateOptions{}); err != nil {
			t.Errorf("create node %s: %v", cl.names[i], err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	want := map[string]bool{}
	for _, i := range idx {
		want[cl.names[i]] = true
	}
	waitNodes(ctx, t, cl.client, 15*time.Minute, func(nodes []corev1.Node) (bool, string) {
		if exited, _ := cl.kwok.Exited(); exited {
			t.Fatalf("kwok exited:\n%s", cl.kwok.LogTail(20))
		}
		done := 0
		for i := range nodes {
			if want[nodes[i].Name] && initialised(&nodes[i]) {
				done++
			}
		}
		return done == len(want), fmt.Sprintf("%d of %d nodes initialised and Ready", done, len(want))
	})
	return time.Since(start)
}

func initialised(n *corev1.Node) bool {
	if framework.HasTaint(n, framework.UninitializedTaint) || n.Spec.ProviderID == "" || len(n.Status.Addresses) == 0 {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitNodes(ctx context.Context, t *testing.T, c kubernetes.Interface, timeout time.Duration, done func([]corev1.Node) (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	every := 250 * time.Millisecond
	for time.Now().Before(deadline) {
		list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err == nil {
			var ok bool
			if ok, last = done(list.Items); ok {
				return
			}
			// Listing thousands of nodes is work for the API server the
			// CCM shares the machine with: poll less often the more there
			// are (5,000 nodes: every 1.25 s).
			every = max(250*time.Millisecond, time.Duration(len(list.Items)/4)*time.Millisecond)
		}
		time.Sleep(every)
	}
	t.Fatalf("after %v: %s", timeout, last)
}

// addressServices creates n LoadBalancer Services and returns the p50 and
// p99 of each one's time from its create to its address, and the time
// until the last was addressed; it fails the cell when they are not all
// addressed within bound.
func addressServices(ctx context.Context, t *testing.T, c kubernetes.Interface, n int, bound time.Duration, tweaks ...framework.ServiceTweak) (p50, p99, all time.Duration) {
	t.Helper()
	w, err := c.CoreV1().Services(svcNS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.Stop() }()
	var mu sync.Mutex
	created := map[string]time.Time{}
	start := time.Now()
	go parallel(allIndexes(n), func(i int) {
		name := fmt.Sprintf("s%05d", i)
		svc := framework.NewLoadBalancerService(svcNS, name, append([]framework.ServiceTweak{framework.WithPort("http", 80, corev1.ProtocolTCP)}, tweaks...)...)
		mu.Lock()
		created[name] = time.Now()
		mu.Unlock()
		if _, err := c.CoreV1().Services(svcNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Errorf("create Service %s: %v", name, err)
		}
	})
	lat := map[string]time.Duration{}
	timeout := time.After(bound)
	for len(lat) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				w = rewatch(ctx, t, c, lat, created, &mu)
				continue
			}
			if s, isSvc := ev.Object.(*corev1.Service); isSvc && ev.Type != watch.Deleted && len(s.Status.LoadBalancer.Ingress) > 0 {
				if _, seen := lat[s.Name]; !seen {
					mu.Lock()
					lat[s.Name] = time.Since(created[s.Name])
					mu.Unlock()
				}
			}
		case <-timeout:
			t.Fatalf("%d of %d Services addressed after %v (SCALE_ADDRESS_TIMEOUT)", len(lat), n, bound)
		}
	}
	all = time.Since(start)
	ds := make([]time.Duration, 0, n)
	for _, d := range lat {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return percentile(ds, 50), percentile(ds, 99), all
}

// rewatch catches up after the API server ended the watch.
func rewatch(ctx context.Context, t *testing.T, c kubernetes.Interface, lat map[string]time.Duration, created map[string]time.Time, mu *sync.Mutex) watch.Interface {
	t.Helper()
	list, err := c.CoreV1().Services(svcNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range list.Items {
		if _, seen := lat[s.Name]; !seen && len(s.Status.LoadBalancer.Ingress) > 0 {
			lat[s.Name] = time.Since(created[s.Name])
		}
	}
	w, err := c.CoreV1().Services(svcNS).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// excludeOne labels the first node node.kubernetes.io/exclude-from-external-load-balancers
// and returns how long until every Service's load balancer was updated
// after it, how many were by then or by the timeout, and how many of them
// had an UpdatedLoadBalancer event. A load balancer counts as updated when
// the CCM logged its update (our controller: "Updated the load balancer's
// targets", after the call; upstream's: "Updating backends for load
// balancer", before it; the AWS backend: "Deregistered targets", also when
// a drift-repair pass's reconcile made the update) or an
// UpdatedLoadBalancer event arrived: client-go's
// event broadcaster drops events beyond its queue of 1,000, so at 5,000
// Services most events never reach the API server. With want 0 (no load
// balancer targets the node) it waits until the CCM is quiet and returns
// the updates made all the same, which should be none.
func excludeOne(ctx context.Context, t *testing.T, cl *cluster, timeout time.Duration, want int) (time.Duration, int, int) {
	t.Helper()
	sel := fields.OneTermEqualSelector("reason", "UpdatedLoadBalancer").String()
	list, err := cl.client.CoreV1().Events(svcNS).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cl.client.CoreV1().Events(svcNS).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	logOff := fileSize(cl.ccm.LogPath())
	start := time.Now()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, corev1.LabelNodeExcludeBalancers)
	if _, err := cl.client.CoreV1().Nodes().Patch(ctx, cl.names[0], types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	evented, logged := map[string]bool{}, map[string]bool{}
	updated := func() int {
		n := len(logged)
		for s := range evented {
			if !logged[s] {
				n++
			}
		}
		return n
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	events := w.ResultChan()
	if want == 0 {
		quiet(t, cl, timeout)
		updatesLogged(cl.ccm.LogPath(), logOff, logged)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					return 0, updated(), len(evented)
				}
				if e, isEv := ev.Object.(*corev1.Event); isEv {
					evented[e.InvolvedObject.Name] = true
				}
			default:
				return 0, updated(), len(evented)
			}
		}
	}
	for updated() < want {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil // the log still tells
				continue
			}
			if e, isEv := ev.Object.(*corev1.Event); isEv {
				evented[e.InvolvedObject.Name] = true
			}
		case <-tick.C:
			logOff = updatesLogged(cl.ccm.LogPath(), logOff, logged)
		case <-deadline:
			t.Logf("node sync: %d of %d load balancers updated after %v (%d events)", updated(), want, timeout, len(evented))
			return timeout, updated(), len(evented)
		}
	}
	return time.Since(start), updated(), len(evented)
}

// updatesLogged adds to logged the Services whose load-balancer update the
// CCM logged after offset from, and returns the offset read up to (whole
// lines only).
func updatesLogged(path string, from int64, logged map[string]bool) int64 {
	to := fileSize(path)
	r, done, err := section(path, from, to)
	defer done()
	if err != nil {
		return from
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return from
	}
	end := bytes.LastIndexByte(raw, '\n') + 1
	for line := range strings.SplitSeq(string(raw[:end]), "\n") {
		switch {
		case strings.Contains(line, "Updated the load balancer's targets"),
			// The AWS backend's deregistration, whichever call made it: a
			// drift-repair pass that begins during the node sync takes the
			// Services it reaches first through its full reconcile.
			strings.Contains(line, `"Deregistered targets"`):
			if _, rest, ok := strings.Cut(line, `service="`+svcNS+`/`); ok {
				name, _, _ := strings.Cut(rest, `"`)
				logged[name] = true
			}
		case strings.Contains(line, "Updating backends for load balancer "+svcNS+"/"):
			_, rest, _ := strings.Cut(line, "Updating backends for load balancer "+svcNS+"/")
			name, _, _ := strings.Cut(rest, " ")
			logged[name] = true
		}
	}
	return from + int64(end)
}

// churn deletes every 1/frac-th node and registers it again, as a node
// replaced under the same name; it returns how many and the time until
// they were all initialised again.
func churn(ctx context.Context, t *testing.T, cl *cluster, frac float64) (int, time.Duration) {
	t.Helper()
	step := max(1, int(1/frac+0.5))
	var idx []int
	for i := 1; i < cl.cell.nodes; i += step {
		idx = append(idx, i)
	}
	start := time.Now()
	parallel(idx, func(i int) {
		if err := cl.client.CoreV1().Nodes().Delete(ctx, cl.names[i], metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete node %s: %v", cl.names[i], err)
		}
	})
	gone := map[string]bool{}
	for _, i := range idx {
		gone[cl.names[i]] = true
	}
	waitNodes(ctx, t, cl.client, 5*time.Minute, func(nodes []corev1.Node) (bool, string) {
		left := 0
		for i := range nodes {
			if gone[nodes[i].Name] {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d churned nodes not yet deleted", left)
	})
	createNodes(ctx, t, cl, idx)
	return len(idx), time.Since(start)
}

// quiet waits until the CCM's log has not grown for 10 s (the CCM done
// with the last change), at most timeout.
func quiet(t *testing.T, cl *cluster, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last, since := fileSize(cl.ccm.LogPath()), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		if s := fileSize(cl.ccm.LogPath()); s != last {
			last, since = s, time.Now()
			continue
		}
		if time.Since(since) >= 10*time.Second {
			return
		}
	}
	t.Logf("the CCM's log still grew after %v", timeout)
}

// nodeWatch classifies every Node change it sees by the fields that
// changed, so a phase can say which changes the CCM reacted to.
type nodeWatch struct {
	mu     sync.Mutex
	counts map[string]int
	last   map[string]*corev1.Node
	cancel context.CancelFunc
}

func watchNodes(ctx context.Context, t *testing.T, c kubernetes.Interface) *nodeWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	nw := &nodeWatch{counts: map[string]int{}, last: map[string]*corev1.Node{}, cancel: cancel}
	go func() {
		rv := ""
		for ctx.Err() == nil {
			w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(time.Second)
				rv = ""
				continue
			}
			for ev := range w.ResultChan() {
				n, ok := ev.Object.(*corev1.Node)
				if !ok {
					continue
				}
				rv = n.ResourceVersion
				if ev.Type != watch.Bookmark {
					nw.see(ev.Type, n)
				}
			}
		}
	}()
	return nw
}

func (nw *nodeWatch) stop() { nw.cancel() }

func (nw *nodeWatch) see(typ watch.EventType, n *corev1.Node) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	old := nw.last[n.Name]
	switch typ {
	case watch.Deleted:
		delete(nw.last, n.Name)
		nw.counts["deleted"]++
		return
	case watch.Added:
		nw.last[n.Name] = n
		if old == nil {
			nw.counts["added"]++
			return
		}
	}
	nw.last[n.Name] = n
	if old == nil {
		return
	}
	for _, k := range nodeDiff(old, n) {
		nw.counts[k]++
	}
}

// nodeDiff names what changed between two versions of a Node.
func nodeDiff(old, n *corev1.Node) []string {
	var out []string
	if !slices.Equal(old.Status.Addresses, n.Status.Addresses) {
		if len(old.Status.Addresses) == len(n.Status.Addresses) && sameSet(old.Status.Addresses, n.Status.Addresses) {
			out = append(out, "addresses reordered")
		} else {
			out = append(out, "addresses")
		}
	}
	if old.Spec.ProviderID != n.Spec.ProviderID {
		out = append(out, "providerID")
	}
	if !mapsEqual(old.Labels, n.Labels) {
		out = append(out, "labels")
	}
	if !mapsEqual(old.Annotations, n.Annotations) {
		out = append(out, "annotations")
	}
	if len(old.Spec.Taints) != len(n.Spec.Taints) {
		out = append(out, "taints")
	}
	if !slices.EqualFunc(old.Status.Conditions, n.Status.Conditions, func(a, b corev1.NodeCondition) bool {
		return a.Type == b.Type && a.Status == b.Status && a.LastHeartbeatTime.Equal(&b.LastHeartbeatTime)
	}) {
		out = append(out, "conditions")
	}
	if len(out) == 0 {
		out = append(out, "other")
	}
	return out
}

func sameSet(a, b []corev1.NodeAddress) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// take returns and resets the counts.
func (nw *nodeWatch) take() map[string]int {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	out := nw.counts
	nw.counts = map[string]int{}
	return out
}

// targetsRight waits until every target group of the AWS fake holds, as
// instance targets, exactly the nodes its Service targets now: the nodes
// not being deleted nor excluded from load balancers and, above AWS's
// quota of targets, carrying awsTargetLabel. It returns how many groups
// differed at its first look and the time from start until none did (at
// most timeout after its first look). A quiet log is no proof that the
// load balancers caught up: the controller's work can wait where nothing
// logs (a node flush held its lock for half a minute at 5,000 nodes).
func targetsRight(ctx context.Context, t *testing.T, cl *cluster, start time.Time, timeout time.Duration) (wrong int, right time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	first := true
	for {
		list, err := cl.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for _, n := range list.Items {
			if n.DeletionTimestamp != nil || n.Labels["node.kubernetes.io/exclude-from-external-load-balancers"] != "" {
				continue
			}
			if cl.cell.nodes > awsTargetQuota && n.Labels[awsTargetLabel] != "true" {
				continue
			}
			want[n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]] = true
		}
		bad, example := 0, ""
		for _, tg := range cl.fake.TargetGroups() {
			have := map[string]bool{}
			for _, tgt := range tg.Targets {
				id, _, _ := strings.Cut(tgt, ":")
				have[id] = true
			}
			if !maps.Equal(have, want) {
				bad++
				if example == "" {
					example = fmt.Sprintf("%s: %d targets, want %d", tg.Name, len(have), len(want))
				}
			}
		}
		if first {
			wrong, first = bad, false
			t.Logf("churn: %d target groups not yet with the nodes' targets when the CCM's log was quiet (%s)", bad, example)
		}
		if bad == 0 {
			return wrong, time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Logf("churn: %d target groups still without the nodes' targets after %v (%s)", bad, timeout, example)
			return wrong, -1
		}
		time.Sleep(5 * time.Second)
	}
}

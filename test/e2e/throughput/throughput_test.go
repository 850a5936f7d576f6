// Package throughput measures, through the built multicloud-ccm binary on a
// real kube-apiserver, how long 1,000 new LoadBalancer Services take to get
// their addresses from the bare-metal backend, beside MetalLB's controller
// (built from the Go module proxy by hack/metallb/build.sh) allocating from
// the same pool on the same API server in the same run; and how soon a
// changed cloud-config is applied. A benchmark, run by `make bench`: it
// reports seconds, Services per second and API writes per Service, never
// passes or fails on them.
package throughput

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

const (
	metallbNS    = "metallb-system"
	metallbClass = "metallb.io/bench"
	pool         = "10.200.0.0/20"
)

// services is how many Services each contender addresses (BENCH_SERVICES
// overrides it).
func services() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_SERVICES")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// chartFlags are the chart's client defaults (charts/multicloud-ccm
// values.yaml, docs/chart.md): the figures an operator gets.
var chartFlags = []string{"--kube-api-qps=200", "--kube-api-burst=400", "--concurrent-service-syncs=10", "--v=1"}

// binaryDefaults are the binary's own defaults where the test framework's
// flags differ from them (--v=2, --concurrent-service-syncs=4): with them,
// the CCM runs as installed with no flag tuning.
var binaryDefaults = []string{"--concurrent-service-syncs=10", "--v=0"}

// upstreamFlags switch classless Services back to upstream's service
// controller (disabled by default), with the chart's limits.
var upstreamFlags = append([]string{"--controllers=*,service"}, chartFlags...)

// benchClass is the config's load-balancer class for the classed run.
const benchClass = "multicloud-ccm.io/bench"

func ccmConfig(pools string) string {
	return `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: bench
loadBalancer: {defaultBackend: metal, classes: [{name: ` + benchClass + `, backend: metal}]}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools: ` + pools + `
`
}

// BenchmarkThousandServices creates the Services for MetalLB's controller
// (with its class, so the CCM leaves them alone), then four times for the
// CCM, each time in a new namespace: classless with the binary's own
// defaults (multicloud-ccm's own controller serves them; no flag tuned),
// classless with the chart's flags, with our class and the chart's flags,
// and classless through upstream's service controller switched back on
// (--controllers=*,service) with the chart's flags. Each contender runs
// alone and allocates from the same pool. It reports for each the seconds
// until every Service shows an address and the writes to Services and
// Events per Service beyond the test's own create, and how soon a changed
// cloud-config is applied.
func BenchmarkThousandServices(b *testing.B) {
	controller, crds := metallb(b)
	cp := framework.StartControlPlaneT(b)
	ctx := context.Background()
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS = -1 // the test's own creates are not the bottleneck
	client := kubernetes.NewForConfigOrDie(cfg)
	n := services()
	config := ccmConfig(`[{name: lan, addresses: ["` + pool + `"]}]`)

	setupMetalLB(ctx, b, cp, crds)
	// One ready node, as in any cluster: without one, every sync adds an
	// UnAvailableLoadBalancer event.
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("worker-0",
		framework.WithProviderID("baremetal://worker-0"), framework.WithoutUninitializedTaint(),
		framework.WithReady(corev1.ConditionTrue),
		framework.WithAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.10"}))); err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		b.StopTimer()
		stop := startMetalLB(b, cp, controller)
		b.StartTimer()
		mlbSecs, mlbWrites := addressAll(ctx, b, cp, client, fmt.Sprintf("metallb-%d", i), n, ptr.To(metallbClass))
		b.StopTimer()
		stop()

		run := func(name string, flags []string, class *string, measureReload bool) (float64, float64, time.Duration) {
			ccm := cp.StartCCMT(b, framework.CCMOptions{CloudConfig: config, ExtraArgs: flags})
			ns := fmt.Sprintf("%s-%d", name, i)
			b.StartTimer()
			secs, writes := addressAll(ctx, b, cp, client, ns, n, class)
			b.StopTimer()
			var reload time.Duration
			if measureReload {
				reload = reloadLatency(ctx, b, ccm)
			}
			if err := ccm.Stop(15 * time.Second); err != nil {
				b.Fatal(err)
			}
			// The next contender starts with no Services of this one to
			// sync at its start.
			forget(ctx, b, client, ns)
			return secs, writes, reload
		}
		defSecs, defWrites, reload := run("ccm-default", binaryDefaults, nil, true)
		chartSecs, chartWrites, _ := run("ccm-chart", chartFlags, nil, false)
		classSecs, classWrites, _ := run("ccm-class", chartFlags, ptr.To(benchClass), false)
		upSecs, upWrites, _ := run("ccm-upstream", upstreamFlags, nil, false)

		b.ReportMetric(mlbSecs, "metallb-s")
		b.ReportMetric(defSecs, "ccm-default-s")
		b.ReportMetric(chartSecs, "ccm-chart-s")
		b.ReportMetric(classSecs, "ccm-class-s")
		b.ReportMetric(upSecs, "ccm-upstream-s")
		b.ReportMetric(defSecs/mlbSecs, "default/metallb")
		b.ReportMetric(chartSecs/mlbSecs, "chart/metallb")
		b.ReportMetric(classSecs/mlbSecs, "class/metallb")
		b.ReportMetric(upSecs/mlbSecs, "upstream/metallb")
		b.ReportMetric(mlbWrites, "metallb-writes/svc")
		b.ReportMetric(defWrites, "ccm-default-writes/svc")
		b.ReportMetric(chartWrites, "ccm-chart-writes/svc")
		b.ReportMetric(classWrites, "ccm-class-writes/svc")
		b.ReportMetric(upWrites, "ccm-upstream-writes/svc")
		b.ReportMetric(reload.Seconds(), "reload-s")
		b.Logf("%d Services: MetalLB's controller %.1fs (%.2f writes/Service); multicloud-ccm classless with the binary's defaults %v %.1fs (%.2f), with the chart's flags %v %.1fs (%.2f), classed with the chart's flags %.1fs (%.2f), classless through upstream's service controller switched back on (%v) %.1fs (%.2f); reload applied in %v",
			n, mlbSecs, mlbWrites, binaryDefaults, defSecs, defWrites, chartFlags, chartSecs, chartWrites, classSecs, classWrites, upstreamFlags, upSecs, upWrites, reload)
		b.StartTimer()
	}
}

// addressAll creates n LoadBalancer Services (without node ports) in a new
// namespace, 32 at a time, and returns the seconds from the first create until every one shows
// an address, and the API writes to Services and Events per Service beyond
// its create.
func addressAll(ctx context.Context, b *testing.B, cp *framework.ControlPlane, client kubernetes.Interface, ns string, n int, class *string) (float64, float64) {
	b.Helper()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	before := writes(ctx, b, cp)
	w, err := client.CoreV1().Services(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.Everything().String()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { w.Stop() }()
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range work {
				svc := framework.NewLoadBalancerService(ns, fmt.Sprintf("s%04d", i), framework.WithPort("http", 80, corev1.ProtocolTCP))
				svc.Spec.LoadBalancerClass = class
				// 3,000 Services would exhaust the default node-port range;
				// neither contender needs node ports.
				svc.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
				if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	addressed := map[string]bool{}
	timeout := time.After(15 * time.Minute)
	for len(addressed) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The API server ends watches under load: catch up with a
				// list and watch again from there.
				w = rewatch(ctx, b, client, ns, addressed)
				continue
			}
			if s, isSvc := ev.Object.(*corev1.Service); isSvc && ev.Type != watch.Deleted && len(s.Status.LoadBalancer.Ingress) > 0 {
				addressed[s.Name] = true
			}
		case <-timeout:
			b.Fatalf("%d of %d Services addressed after 15 minutes", len(addressed), n)
		}
	}
	secs := time.Since(start).Seconds()
	// Writes still in flight when the last address appears (events) count too.
	time.Sleep(3 * time.Second)
	perSvc, detail := perService(before, writes(ctx, b, cp), n)
	b.Logf("%s: %d Services addressed in %.1fs; writes per Service: %s", ns, n, secs, detail)
	return secs, perSvc
}

// rewatch lists the Services of ns into addressed and returns a watch
// from that list's resourceVersion.
func rewatch(ctx context.Context, b *testing.B, client kubernetes.Interface, ns string, addressed map[string]bool) watch.Interface {
	b.Helper()
	list, err := client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range list.Items {
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			addressed[s.Name] = true
		}
	}
	w, err := client.CoreV1().Services(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// forget removes the Services of ns without any controller: their
// finalizers dropped, then deleted (this control plane runs no namespace
// controller to empty a deleted namespace).
func forget(ctx context.Context, b *testing.B, client kubernetes.Interface, ns string) {
	b.Helper()
	list, err := client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	work := make(chan string)
	for range 32 {
		wg.Go(func() {
			for name := range work {
				if _, err := client.CoreV1().Services(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
					b.Error(err)
				}
				if err := client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, s := range list.Items {
		work <- s.Name
	}
	close(work)
	wg.Wait()
}

// writes returns kube-apiserver's apiserver_request_total over the
// mutating verbs on Services (status included) and Events, by
// "verb resource/subresource".
func writes(ctx context.Context, b *testing.B, cp *framework.ControlPlane) map[string]int {
	b.Helper()
	raw, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	counts := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		labels, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		verb, resource, sub := label(labels, "verb"), label(labels, "resource"), label(labels, "subresource")
		if (resource != "services" && resource != "events") || !slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE", "APPLY"}, verb) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			b.Fatalf("apiserver_request_total: %q: %v", line, err)
		}
		key := verb + " " + resource
		if sub != "" {
			key += "/" + sub
		}
		if code := label(labels, "code"); !strings.HasPrefix(code, "2") {
			key += " (" + code + ")"
		}
		counts[key] += int(v)
	}
	return counts
}

func label(labels, name string) string {
	_, rest, ok := strings.Cut(labels, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// perService is the writes between before and after, beyond n creates, per
// Service, in total and by kind.
func perService(before, after map[string]int, n int) (float64, string) {
	total := -n
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		d := after[k] - before[k]
		if k == "POST services" {
			d -= n
		}
		total += after[k] - before[k]
		if d != 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(d)/float64(n)))
		}
	}
	return float64(total) / float64(n), strings.Join(parts, ", ")
}

// reloadLatency rewrites the CCM's cloud-config with a second pool and
// returns how long until the CCM reports the reload applied.
func reloadLatency(ctx context.Context, b *testing.B, ccm *framework.CCM) time.Duration {
	b.Helper()
	const success = `multicloud_ccm_config_reloads_total{result="success"}`
	before := metricValue(ctx, b, ccm, success)
	next := ccmConfig(`[{name: lan, addresses: ["` + pool + `"]}, {name: extra, addresses: ["10.201.0.0/24"]}]`)
	tmp := ccm.CloudConfigPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(next), 0o600); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := os.Rename(tmp, ccm.CloudConfigPath); err != nil {
		b.Fatal(err)
	}
	for metricValue(ctx, b, ccm, success) == before {
		if time.Since(start) > time.Minute {
			b.Fatalf("the changed cloud-config was not applied within a minute:\n%s", ccm.Logs(framework.LogLines))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func metricValue(ctx context.Context, b *testing.B, ccm *framework.CCM, name string) string {
	b.Helper()
	code, body, err := ccm.Get(ctx, "/metrics")
	if err != nil || code != 200 {
		b.Fatalf("/metrics: %d %v", code, err)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// metallb returns MetalLB's controller binary and CRD folder, skipping
// (failing in CI) when hack/metallb/build.sh has not run.
func metallb(b *testing.B) (controller, crds string) {
	b.Helper()
	p := framework.OutputFiles(b, "METALLB_DIR", "metallb", "metallb", "controller", "crds/metallb.io_ipaddresspools.yaml")
	return p[0], filepath.Dir(p[1])
}

// setupMetalLB installs MetalLB's CRDs, its namespace, the controller's own
// Pod (unscheduled: v0.16's controller reads it at start) and the pool.
func setupMetalLB(ctx context.Context, b *testing.B, cp *framework.ControlPlane, crds string) {
	b.Helper()
	run := func(stdin string, args ...string) {
		out, err := cp.KubectlWith(ctx, cp.AdminKubeconfig, strings.NewReader(stdin), args...)
		if err != nil {
			b.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("", "apply", "--server-side", "-f", crds)
	run("", "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
	run("", "create", "namespace", metallbNS)
	run(`apiVersion: v1
kind: ServiceAccount
metadata: {name: default, namespace: `+metallbNS+`}
---
apiVersion: v1
kind: Pod
metadata: {name: controller, namespace: `+metallbNS+`}
spec: {containers: [{name: controller, image: quay.io/metallb/controller:v0.16.2}]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: lan, namespace: `+metallbNS+`}
spec: {addresses: ["`+pool+`"]}
`, "apply", "-f", "-")
}

// startMetalLB runs MetalLB's controller for the benchmark's class, and
// returns the function stopping it.
func startMetalLB(b *testing.B, cp *framework.ControlPlane, controller string) func() {
	b.Helper()
	probe, err := framework.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	p, err := framework.StartProcess(framework.ProcessOptions{
		Name: "metallb-controller", Path: controller,
		Args: []string{"--webhook-mode=disabled", "--disable-cert-rotation", "--port=0", "--lb-class=" + metallbClass,
			"--health-probe-port=" + strconv.Itoa(probe), "--log-level=warn"},
		Env:     append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig, "METALLB_NAMESPACE="+metallbNS, "METALLB_POD_NAME=controller"),
		LogPath: filepath.Join(cp.Dir, "metallb-controller.log"),
	})
	if err != nil {
		b.Fatal(err)
	}
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", probe)
	framework.Eventually(b, time.Minute, "MetalLB's controller ready", func(ctx context.Context) (bool, string, error) {
		if exited, _ := p.Exited(); exited {
			return false, "", fmt.Errorf("MetalLB's controller exited:\n%s", p.LogTail(framework.LogLines))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ready, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	})
	return func() {
		if err := p.Stop(10 * time.Second); err != nil {
			b.Logf("stop MetalLB's controller: %v\n%s", err, p.LogTail(framework.LogLines))
		}
	}
}

package chart

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// admissionNS is the only namespace the test's policies check (their
// namespaceSelector), so the other tests sharing the control plane are not
// affected.
const admissionNS = "admission-e2e"

// warnings collects the API server's warning headers.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// installAdmission applies the chart's admission objects (release "adm",
// values hybrid: backends dc1 and aws-eu; dc1 announcing through kube-vip,
// admissionPolicy.kubeVIP) limited to admissionNS (which
// must exist), waits until the policy refuses a bad Service there, and
// removes them at the end.
func installAdmission(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	ctx := ctxFor(t)
	manifest, err := runHelm(t, "template", "adm", chartDir(t), "--namespace", namespace, "--kube-version", kubeVersion,
		"-f", valuesFile("hybrid"), "--set", `admissionPolicy.namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=`+admissionNS,
		"--set", "admissionPolicy.kubeVIP=true",
		"--show-only", "templates/admissionpolicy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cp.KubectlWith(ctx, cp.AdminKubeconfig, strings.NewReader(manifest), "apply", "--validate=strict", "-f", "-"); err != nil {
		t.Fatalf("apply the admission policies: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := cp.KubectlWith(context.Background(), cp.AdminKubeconfig, strings.NewReader(manifest), "delete", "--ignore-not-found", "-f", "-"); err != nil {
			t.Errorf("remove the admission policies: %v\n%s", err, out)
		}
	})
	// The policy takes effect once the API server's informers saw it.
	probe := lbService("probe", map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "False"})
	framework.Eventually(t, time.Minute, "the admission policy refusing a bad Service", func(ctx context.Context) (bool, string, error) {
		_, err := cp.Client.CoreV1().Services(admissionNS).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return false, "admitted", nil
		}
		return apierrors.IsInvalid(err), err.Error(), nil
	})
}

func lbService(name string, annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: admissionNS, Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// serviceYAML is a LoadBalancer Service manifest for kubectl.
func serviceYAML(name string, annotations map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: %s\n  annotations:\n", name, admissionNS)
	for k, v := range annotations {
		fmt.Fprintf(&b, "    %s: %q\n", k, v)
	}
	b.WriteString("spec:\n  type: LoadBalancer\n  ports:\n  - {name: http, port: 80, protocol: TCP}\n")
	return b.String()
}

// message is what the registry's reader says of value, which the policy
// must say too.
func message(t *testing.T, name annotation.Name, value string) string {
	t.Helper()
	s, ok := annotation.Lookup(name)
	if !ok {
		t.Fatalf("%s is not in the registry", name)
	}
	err := s.Check(value, []string{"dc1", "aws-eu"})
	if err == nil {
		t.Fatalf("%s=%q is good", name, value)
	}
	return err.Error()
}

// TestAdmissionPolicy runs the chart's admission policies on the real
// kube-apiserver: kubectl apply and a client create of Services with bad
// annotation values fail with the reader's message (every problem, joined
// by "; "), good ones pass, an update keeping a bad value written before is
// admitted, and a change that replaces the load balancer is admitted with
// a warning naming the consequence (kubectl's "Warning:" and the client's
// warning header).
func TestAdmissionPolicy(t *testing.T) {
	cp := suite.ControlPlane(t)
	ctx := ctxFor(t)
	const (
		internal = annotation.Name("service.beta.kubernetes.io/aws-load-balancer-internal")
		scheme   = annotation.Name("service.beta.kubernetes.io/aws-load-balancer-scheme")
		interval = annotation.Name("loadbalancer.openstack.org/health-monitor-delay")
	)
	// A Service with a bad value from before the policy.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: admissionNS}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Services(admissionNS).Create(ctx, lbService("legacy", map[string]string{string(interval): "0"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	installAdmission(t, cp)

	t.Run("kubectl apply of a bad Service fails with the message", func(t *testing.T) {
		bad := map[string]string{string(annotation.LoadBalancerBackend): "dc1,gcp", string(internal): "False", string(interval): "0300"}
		out, err := cp.KubectlWith(ctx, cp.AdminKubeconfig, strings.NewReader(serviceYAML("bad", bad)), "apply", "-f", "-")
		if err == nil {
			t.Fatalf("admitted:\n%s", out)
		}
		t.Logf("kubectl: %v", err)
		for _, n := range []annotation.Name{annotation.LoadBalancerBackend, internal} {
			if want := message(t, n, bad[string(n)]); !strings.Contains(err.Error(), want) {
				t.Errorf("kubectl says\n%v\nwithout\n%s", err, want)
			}
		}
		want := message(t, annotation.LoadBalancerBackend, "dc1,gcp") + "; " + message(t, internal, "False")
		if !strings.Contains(err.Error(), want) {
			t.Errorf("kubectl says\n%v\nwithout the problems joined as the reader joins them:\n%s", err, want)
		}
		if strings.Contains(err.Error(), string(interval)) {
			t.Errorf("0300 (300, in range) refused: %v", err)
		}
	})

	client, warned := warningClient(t, cp)
	t.Run("client create of a bad Service fails with 422 and the message", func(t *testing.T) {
		for name, ann := range map[annotation.Name]string{
			annotation.LoadBalancerIPs: "::ffff:c000:201", annotation.LoadBalancerDrain: "-5m", interval: " ", scheme: "Internal",
			"loadbalancer.openstack.org/floating-network-id": "net-1", "metallb.io/loadBalancerIPs": "192.0.2.1,192.0.2.2",
		} {
			_, err := client.CoreV1().Services(admissionNS).Create(ctx, lbService("bad-client", map[string]string{string(name): ann}), metav1.CreateOptions{})
			var status apierrors.APIStatus
			if !errors.As(err, &status) || status.Status().Code != http.StatusUnprocessableEntity {
				t.Errorf("%s=%q: %v, want a 422", name, ann, err)
				continue
			}
			if want := message(t, name, ann); !strings.Contains(err.Error(), want) {
				t.Errorf("%s=%q: the API server says\n%v\nwithout\n%s", name, ann, err, want)
			}
		}
	})

	t.Run("a kube-vip request the bare-metal backend refuses is refused", func(t *testing.T) {
		const vip = "kube-vip.io/loadbalancerIPs"
		for _, v := range []string{"0.0.0.0", "127.0.0.1", "fe80::1", "", "lb.example.com"} {
			_, err := client.CoreV1().Services(admissionNS).Create(ctx, lbService("bad-vip", map[string]string{vip: v}), metav1.CreateOptions{})
			_, want := annotation.ParseKubeVIPIPs(vip, v)
			if want == nil || err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want.Error()) {
				t.Errorf("%s=%q: the API server says %v, want a 422 with\n%v", vip, v, err, want)
			}
		}
		marked := map[string]string{vip: "0.0.0.0", "multicloud-ccm.io/kube-vip-announced": "true"}
		if _, err := client.CoreV1().Services(admissionNS).Create(ctx, lbService("vip-marked", marked), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("a value marked as the backend's (not its request) refused: %v", err)
		}
		if _, err := client.CoreV1().Services(admissionNS).Create(ctx, lbService("vip-good", map[string]string{vip: "203.0.113.5"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("a good request refused: %v", err)
		}
	})

	t.Run("a good Service passes; a replacement warns", func(t *testing.T) {
		good := map[string]string{string(annotation.LoadBalancerBackend): "aws-eu, dc1", string(scheme): "internet-facing", string(interval): "0300", "metallb.io/loadBalancerIPs": ""}
		if out, err := cp.KubectlWith(ctx, cp.AdminKubeconfig, strings.NewReader(serviceYAML("good", good)), "apply", "-f", "-"); err != nil {
			t.Fatalf("a good Service refused: %v\n%s", err, out)
		}
		good[string(scheme)] = "internal"
		cmd := strings.NewReader(serviceYAML("good", good))
		out, err := cp.KubectlWith(ctx, cp.AdminKubeconfig, cmd, "apply", "-f", "-", "--warnings-as-errors")
		want := `annotation service.beta.kubernetes.io/aws-load-balancer-scheme changed from "internet-facing" to "internal": this replaces the NLB (and its DNS name)`
		if err == nil || !strings.Contains(err.Error(), "Warning:") || !strings.Contains(err.Error(), want) {
			t.Fatalf("the scheme change: %v\n%s\nwant a warning with %q", err, out, want)
		}
		t.Logf("kubectl: %v", err)
		// --warnings-as-errors fails the command but the change went
		// through: the warning does not refuse it.
		svc, err := cp.Client.CoreV1().Services(admissionNS).Get(ctx, "good", metav1.GetOptions{})
		if err != nil || svc.Annotations[string(scheme)] != "internal" {
			t.Fatalf("after the warned change: %v, %v", err, svc.Annotations)
		}
		warned.take()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"aws-eu"}}}`, annotation.LoadBalancerBackend)
		if _, err := client.CoreV1().Services(admissionNS).Patch(ctx, "good", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		got := warned.take()
		want = `annotation multicloud-ccm.io/load-balancer-backend changed from "aws-eu, dc1" to "aws-eu": this moves the load balancer`
		if len(got) != 1 || !strings.Contains(got[0], want) {
			t.Errorf("backend change warnings %q, want one with %q", got, want)
		}
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:"10"}}}`, interval)
		if _, err := client.CoreV1().Services(admissionNS).Patch(ctx, "good", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := warned.take(); len(got) != 0 {
			t.Errorf("a change replacing nothing warns: %q", got)
		}
	})

	t.Run("an unchanged bad value written before the policy is kept", func(t *testing.T) {
		patch := func(value string) error {
			p := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,"note":%q}}}`, interval, value, time.Now().String())
			_, err := client.CoreV1().Services(admissionNS).Patch(ctx, "legacy", types.MergePatchType, []byte(p), metav1.PatchOptions{})
			return err
		}
		if err := patch("0"); err != nil {
			t.Errorf("an edit keeping the bad value written before the policy refused: %v", err)
		}
		if err := patch("-3"); err == nil || !strings.Contains(err.Error(), message(t, interval, "-3")) {
			t.Errorf("a change to another bad value: %v", err)
		}
	})
}

// warningClient is an admin client whose warnings are collected.
func warningClient(t *testing.T, cp *framework.ControlPlane) (kubernetes.Interface, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(cp.RESTConfig(cp.AdminToken))
	cfg.WarningHandler = w
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// TestAdmissionParameters: the policy's parameter ConfigMap lists the
// backends of config that offer load balancers (aws; openstack unless
// disabled; baremetal with address pools; never vsphere), or
// admissionPolicy.backends, none with an existing cloud-config Secret;
// kubeVIP is "true" when a bare-metal backend of config announces through
// kube-vip or admissionPolicy.kubeVIP says so; and
// nothing of the policy is rendered when it is off or before Kubernetes
// 1.32.
func TestAdmissionParameters(t *testing.T) {
	backendsOf := func(t *testing.T, args ...string) (string, bool) {
		t.Helper()
		out := mustRender(t, args...)
		for _, o := range parse(t, out) {
			if o.kind() == "ConfigMap" && strings.HasSuffix(o.name(), "-admission") {
				b, _ := get(o, "data", "backends").(string)
				return b, true
			}
		}
		return "", false
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"hybrid: baremetal with pools and aws (sorted), not vsphere nor openstack with load balancers disabled", []string{"-f", valuesFile("hybrid")}, "aws-eu,dc1"},
		{"openstack", []string{"-f", valuesFile("openstack")}, "os-region1"},
		{"existing Secret: not known", []string{"-f", valuesFile("existing-secrets")}, ""},
		{"set by hand", []string{"-f", valuesFile("existing-secrets"), "--set", "admissionPolicy.backends={metal,aws}"}, "aws,metal"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := backendsOf(t, tt.args...)
			if !ok || got != tt.want {
				t.Errorf("backends %q (rendered: %v), want %q", got, ok, tt.want)
			}
		})
	}
	kubeVIPOf := func(t *testing.T, args ...string) string {
		t.Helper()
		for _, o := range parse(t, mustRender(t, args...)) {
			if o.kind() == "ConfigMap" && strings.HasSuffix(o.name(), "-admission") {
				v, _ := get(o, "data", "kubeVIP").(string)
				return v
			}
		}
		return "(not rendered)"
	}
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"hybrid: dc1 does not announce":           {[]string{"-f", valuesFile("hybrid")}, "false"},
		"hybrid, dc1 announcing through kube-vip": {[]string{"-f", valuesFile("hybrid"), "--set-json", `config.backends[0]={"name":"dc1","type":"baremetal","baremetal":{"announce":"kube-vip","addressPools":[{"name":"public","addresses":["203.0.113.0/28"]}]}}`}, "true"},
		"existing Secret, set by hand":            {[]string{"-f", valuesFile("existing-secrets"), "--set", "admissionPolicy.kubeVIP=true"}, "true"},
		"existing Secret":                         {[]string{"-f", valuesFile("existing-secrets")}, "false"},
	} {
		if got := kubeVIPOf(t, c.args...); got != c.want {
			t.Errorf("%s: kubeVIP %q, want %q", name, got, c.want)
		}
	}
	if _, ok := backendsOf(t, "-f", valuesFile("minimal"), "--set", "admissionPolicy.enabled=false"); ok {
		t.Error("rendered with admissionPolicy.enabled=false")
	}
	out, err := runHelm(t, "template", release, chartDir(t), "--namespace", namespace, "--kube-version", "v1.31.4", "-f", valuesFile("minimal"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "ValidatingAdmissionPolicy") {
		t.Error("the policy is rendered for Kubernetes 1.31, whose CEL lacks two-variable comprehensions")
	}
}

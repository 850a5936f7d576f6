package chart

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

const (
	settle = 60 * time.Second
	// metalClass is the load-balancer class of testdata/e2e/baremetal.yaml.
	metalClass   = "multicloud-ccm.io/metal"
	backendLabel = "multicloud-ccm.io/backend"
)

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// startAuditedControlPlane starts a private control plane whose
// kube-apiserver writes an audit log of every request (metadata level).
func startAuditedControlPlane(t *testing.T) (*framework.ControlPlane, string) {
	t.Helper()
	bins := framework.RequireBinaries(t, nil)
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(dir, "audit.log")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cp, err := framework.StartControlPlane(ctx, framework.ControlPlaneOptions{
		Binaries:           bins,
		ExtraAPIServerArgs: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog, "--audit-log-mode=blocking"},
	})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(cp.Logs(framework.LogLines))
		}
		if err := cp.Stop(t.Failed()); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return cp, auditLog
}

// TestRBACProven installs the chart's ServiceAccount and RBAC on a real
// API server, runs the built CCM with a token of that ServiceAccount and
// the chart's own flags (use-service-account-credentials, leader election),
// and drives every path the controllers take: node initialisation, a Warning
// about a node nobody claims, deletion of a vanished machine's node, a load
// balancer's address, finalizer and deletion, the router's record emptied
// when a Service stops being a LoadBalancer, and an authenticated
// /metrics. A missing permission fails a step (and shows as a "forbid" in
// the audit log); a granted permission that no request used fails too.
//
// Both shapes of the chart's RBAC are run: the default, where the
// controllers act as their own ServiceAccounts (the client builder's
// --use-service-account-credentials), and the one where every controller
// acts as the chart's ServiceAccount.
func TestRBACProven(t *testing.T) {
	tests := []struct {
		name      string
		saCreds   string
		helmArgs  []string
		notDriven map[string]string
	}{
		{
			name: "service-account-credentials", saCreds: "true",
			notDriven: map[string]string{
				// The router clears an address it released from a
				// Service's status only when the Service leaves every
				// backend (its backend annotation removed, no default).
				"patch services/status": "released address clearing",
				// multicloud-load-balancer reads a Service again only
				// after a write lost to another writer.
				"get services": "re-read after a conflict",
				// Upstream's service controller is disabled by default
				// (multicloud-load-balancer serves classless Services);
				// the chart keeps its identity for the switch back,
				// --controllers=*,service.
				"get serviceaccounts/service-controller":          "upstream's service controller, off by default",
				"create serviceaccounts/token/service-controller": "upstream's service controller, off by default",
			},
		},
		{
			name: "ccm-identity", saCreds: "false",
			helmArgs: []string{"--set", "args.use-service-account-credentials=false"},
			notDriven: map[string]string{
				// Only a backend that reports machines shut down makes the
				// lifecycle controller patch the shutdown taint (and get the
				// node to take it off again); bare metal never does.
				"patch nodes": "shutdown taint",
				"get nodes":   "shutdown taint removal",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rbacProven(t, tt.saCreds, tt.helmArgs, tt.notDriven)
		})
	}
}

func rbacProven(t *testing.T, saCreds string, helmArgs []string, notDriven map[string]string) {
	cp, auditLog := startAuditedControlPlane(t)
	ctx := ctxFor(t)
	// A release name other than multicloud-ccm, so that the chart's
	// ServiceAccount and the router's client-builder identity
	// (kube-system/multicloud-ccm) are two subjects, each checked alone.
	manifest := mustRender(t, append([]string{"-f", filepath.Join("testdata", "e2e", "baremetal.yaml"), "--set", "fullnameOverride=mccm-rbac"}, helmArgs...)...)
	objs := parse(t, manifest)
	installed := installRBAC(t, cp, manifest)
	saNS, saName := chartServiceAccount(t, objs)
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, saNS, saName)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configFromRendering(t, objs)
	if err != nil {
		t.Fatal(err)
	}
	args := ccmArgs(t, objs)
	if v, _ := flagValue(args, "use-service-account-credentials"); v != saCreds {
		t.Fatalf("--use-service-account-credentials=%q, want %s; args %v", v, saCreds, args)
	}
	ccm := cp.StartCCMT(t, framework.CCMOptions{CloudConfig: cfg, Kubeconfig: kubeconfig, ExtraArgs: args})

	// cloud-node: initialise a node by providerID.
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("bm-1", framework.WithProviderID("baremetal://bm-1"))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "bm-1 initialised", framework.NodeMatches(cp.Client, "bm-1", func(n *corev1.Node) (bool, string) {
		ok := !framework.HasTaint(n, framework.UninitializedTaint) && n.Labels[backendLabel] == "metal" &&
			slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Address == "10.0.0.11" })
		return ok, fmt.Sprintf("taints %v labels %v addresses %v", n.Spec.Taints, n.Labels, n.Status.Addresses)
	}))

	// The router's own identity: a Warning, repeated (create, then patch).
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("stray")); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "a repeated Warning about stray", repeatedEvent(cp, "Node", "stray", ""))

	// cloud-node-lifecycle: a NotReady node whose machine is gone is deleted.
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("bm-gone", framework.WithProviderID("baremetal://bm-gone"),
		framework.WithoutUninitializedTaint(), framework.WithReady(corev1.ConditionFalse))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "bm-gone deleted", framework.NodeGone(cp.Client, "bm-gone"))

	// service: address, finalizer, deletion.
	svc := framework.NewLoadBalancerService("default", "web", framework.WithPort("http", 80, corev1.ProtocolTCP))
	if _, err := framework.CreateService(ctx, cp.Client, svc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "web has an address and the cleanup finalizer", framework.ServiceMatches(cp.Client, "default", "web", func(s *corev1.Service) (bool, string) {
		ok, seen := framework.HasIngress(s)
		return ok && framework.HasCleanupFinalizer(s), seen
	}))
	// The router's record (patch services): a Service that stops being a
	// LoadBalancer keeps living, so the router drops the backend from its
	// record once the load balancer is deleted. (On a Service being
	// deleted it leaves the record as it is.)
	if _, err := cp.Client.CoreV1().Services("default").Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"type":"ClusterIP"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "web, now a ClusterIP Service, has no address, finalizer or recorded backend", framework.ServiceMatches(cp.Client, "default", "web", func(s *corev1.Service) (bool, string) {
		ok, seen := framework.HasIngress(s)
		rec := s.Annotations[string(annotation.LoadBalancerBackends)]
		return !ok && !framework.HasCleanupFinalizer(s) && rec == "", fmt.Sprintf("%s; finalizers %v; %s=%q", seen, s.Finalizers, annotation.LoadBalancerBackends, rec)
	}))
	if err := cp.Client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "web deleted", framework.ServiceGone(cp.Client, "default", "web"))

	// multicloud-load-balancer: a classed Service's address, finalizer and
	// deletion, and a repeated Warning for a classed Service it cannot
	// serve (an address outside the pool).
	classed := framework.NewLoadBalancerService("default", "web-classed", framework.WithPort("http", 80, corev1.ProtocolTCP), framework.WithLoadBalancerClass(metalClass))
	if _, err := framework.CreateService(ctx, cp.Client, classed); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "web-classed has an address and the cleanup finalizer", framework.ServiceMatches(cp.Client, "default", "web-classed", func(s *corev1.Service) (bool, string) {
		ok, seen := framework.HasIngress(s)
		return ok && framework.HasCleanupFinalizer(s), seen
	}))
	if err := cp.Client.CoreV1().Services("default").Delete(ctx, "web-classed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "web-classed deleted (finalizer removed)", framework.ServiceGone(cp.Client, "default", "web-classed"))
	bad := framework.NewLoadBalancerService("default", "bad-classed", framework.WithPort("http", 80, corev1.ProtocolTCP), framework.WithLoadBalancerClass(metalClass),
		framework.WithAnnotation("multicloud-ccm.io/load-balancer-ips", "203.0.113.9"))
	if _, err := framework.CreateService(ctx, cp.Client, bad); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "a repeated SyncLoadBalancerFailed on bad-classed", repeatedEvent(cp, "Service", "bad-classed", "SyncLoadBalancerFailed"))
	if err := cp.Client.CoreV1().Services("default").Delete(ctx, "bad-classed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "bad-classed deleted (finalizer removed)", framework.ServiceGone(cp.Client, "default", "bad-classed"))

	// Delegated authentication and authorization of the secure port.
	if code, body, err := ccm.Get(ctx, "/metrics"); err != nil || code != 200 {
		t.Fatalf("GET /metrics as admin: %d %v %.300s", code, err, body)
	}
	if code, _, err := ccm.GetWithToken(ctx, "/metrics", ""); err != nil || code != 401 && code != 403 {
		t.Errorf("GET /metrics without a token: %d %v; want 401 or 403", code, err)
	}
	if holder, err := framework.LeaseHolder(ctx, cp.Client, "kube-system", "cloud-controller-manager"); err != nil || holder == "" {
		t.Errorf("lease holder %q, %v: the CCM should lead", holder, err)
	}

	// The leader's status ConfigMap: created at start, then updated (at
	// most every 10 s) as the calls above change the backends' status.
	framework.Eventually(t, settle, "the status ConfigMap created, then updated", statusUpdated(cp))

	if err := ccm.Stop(15 * time.Second); err != nil {
		t.Errorf("stop CCM: %v", err)
	}
	if log, err := os.ReadFile(ccm.LogPath()); err == nil && strings.Contains(strings.ToLower(string(log)), "forbidden") {
		t.Errorf("the CCM's log reports a forbidden request:\n%s", grepLines(string(log), "forbidden"))
	}
	counts := checkAudit(t, auditLog, installed, notDriven)
	// Under --use-service-account-credentials the controllers and the
	// router really act as their own identities.
	if saCreds == "true" {
		for _, id := range []string{"node-controller", "multicloud-ccm", "multicloud-load-balancer"} {
			if counts["system:serviceaccount:kube-system:"+id] == 0 {
				t.Errorf("no request as kube-system/%s: the controllers did not use their own identities", id)
			}
		}
	}
}

// statusUpdated holds once the status ConfigMap changed after it was
// first seen.
func statusUpdated(cp *framework.ControlPlane) framework.Condition {
	first := ""
	return func(ctx context.Context) (bool, string, error) {
		cm, err := cp.Client.CoreV1().ConfigMaps(namespace).Get(ctx, "multicloud-ccm-status", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if first == "" {
			first = cm.ResourceVersion
		}
		return cm.ResourceVersion != first, "resourceVersion " + cm.ResourceVersion, nil
	}
}

// controllerIdentities are the ServiceAccounts the client builder uses
// under --use-service-account-credentials.
var controllerIdentities = []string{"node-controller", "service-controller", "route-controller", "multicloud-ccm", "multicloud-load-balancer"}

// auditEvent is the part of an audit.k8s.io/v1 Event the check reads.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	RequestURI string `json:"requestURI"`
	ObjectRef  *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	Annotations map[string]string `json:"annotations"`
}

func (e auditEvent) resource() string {
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

// grant is one verb on one resource (and name) a role gives a subject.
type grant struct {
	subject, namespace, group, resource, verb, name string
}

func (g grant) String() string {
	s := fmt.Sprintf("%s %s", g.verb, g.resource)
	if g.group != "" {
		s += "." + g.group
	}
	if g.name != "" {
		s += "/" + g.name
	}
	if g.namespace != "" {
		s += " in " + g.namespace
	}
	return s + " to " + g.subject
}

// grants expands the installed roles, through their bindings, into single
// grants per subject.
func grants(t *testing.T, installed []object) []grant {
	t.Helper()
	roles := map[string]object{}
	for _, o := range installed {
		if o.kind() == "ClusterRole" || o.kind() == "Role" {
			roles[o.kind()+"/"+o.namespace()+"/"+o.name()] = o
		}
	}
	var out []grant
	for _, b := range installed {
		if b.kind() != "ClusterRoleBinding" && b.kind() != "RoleBinding" {
			continue
		}
		refKind, _ := get(b, "roleRef", "kind").(string)
		refName, _ := get(b, "roleRef", "name").(string)
		ns := ""
		if refKind == "Role" {
			ns = b.namespace()
		}
		role, ok := roles[refKind+"/"+ns+"/"+refName]
		if !ok {
			t.Fatalf("%s %s binds %s %s, which the chart does not create", b.kind(), b.name(), refKind, refName)
		}
		for _, s := range get(b, "subjects").([]any) {
			subject := fmt.Sprintf("system:serviceaccount:%s:%s", get(s, "namespace"), get(s, "name"))
			for _, r := range get(role, "rules").([]any) {
				names := toStrings(get(r, "resourceNames"))
				if len(names) == 0 {
					names = []string{""}
				}
				for _, g := range toStrings(get(r, "apiGroups")) {
					for _, res := range toStrings(get(r, "resources")) {
						for _, v := range toStrings(get(r, "verbs")) {
							for _, n := range names {
								out = append(out, grant{subject: subject, namespace: b.namespace(), group: g, resource: res, verb: v, name: n})
							}
						}
					}
				}
			}
		}
	}
	return out
}

// checkAudit fails the test for every request of the CCM's identities that
// RBAC refused, and for every granted verb that no allowed request used.
// notDriven lists grants ("verb resource" or "verb resource/name", to
// anyone, or "verb resource as <kube-system ServiceAccount>", to that
// identity only) this run cannot drive, with the reason.
// It returns the number of allowed requests per identity.
func checkAudit(t *testing.T, path string, installed []object, notDriven map[string]string) map[string]int {
	t.Helper()
	f, err := os.Open(path) //nolint:gosec // The test's audit log.
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() //nolint:errcheck // Read-only.
	gs := grants(t, installed)
	ours := map[string]bool{}
	for _, g := range gs {
		ours[g.subject] = true
	}
	for _, id := range controllerIdentities {
		ours["system:serviceaccount:kube-system:"+id] = true
	}
	used := map[grant]bool{}
	var forbidden []string
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log line does not parse: %v", err)
		}
		if !ours[e.User.Username] || e.Stage != "ResponseComplete" && e.Stage != "ResponseStarted" && e.Stage != "Panic" {
			continue
		}
		decision := e.Annotations["authorization.k8s.io/decision"]
		if e.ObjectRef == nil {
			continue // discovery and other non-resource URLs
		}
		what := fmt.Sprintf("%s %s %s/%s in %q as %s", e.Verb, e.resource(), e.ObjectRef.APIGroup, e.ObjectRef.Name, e.ObjectRef.Namespace, e.User.Username)
		if decision == "forbid" {
			forbidden = append(forbidden, what)
			continue
		}
		if decision != "allow" {
			continue
		}
		counts[e.User.Username]++
		verbs := []string{e.Verb}
		if e.Verb == "watch" && strings.Contains(e.RequestURI, "sendInitialEvents=true") {
			// A streaming list (client-go's WatchList): the informer's
			// initial LIST, served through the watch. Clients fall back to
			// a plain LIST where the server does not stream, so list stays
			// granted and counts as used here.
			verbs = append(verbs, "list")
		}
		for _, g := range gs {
			if g.subject == e.User.Username && slices.Contains(verbs, g.verb) && g.resource == e.resource() && g.group == e.ObjectRef.APIGroup &&
				(g.namespace == "" || g.namespace == e.ObjectRef.Namespace) && (g.name == "" || g.name == e.ObjectRef.Name || e.ObjectRef.Name == "") {
				used[g] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(forbidden) > 0 {
		t.Errorf("RBAC refused %d requests of the CCM (a permission is missing):\n  %s", len(forbidden), strings.Join(dedupe(forbidden), "\n  "))
	}
	var unused []string
	for _, g := range gs {
		reason, ok := notDriven[g.verb+" "+g.resource]
		if !ok && g.name != "" {
			reason, ok = notDriven[g.verb+" "+g.resource+"/"+g.name]
		}
		if !ok {
			reason, ok = notDriven[g.verb+" "+g.resource+" as "+strings.TrimPrefix(g.subject, "system:serviceaccount:kube-system:")]
		}
		if ok && g.group == "" {
			t.Logf("not driven by this run: %s (%s)", g, reason)
			continue
		}
		if !used[g] {
			unused = append(unused, g.String())
		}
	}
	if len(unused) > 0 {
		t.Errorf("the chart grants %d permissions the run never used (drop them, or drive the path that needs them):\n  %s", len(unused), strings.Join(dedupe(unused), "\n  "))
	}
	t.Logf("audit: %d grants checked; allowed requests per identity: %v", len(gs), counts)
	return counts
}

func dedupe(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(strings.ToLower(l), sub) {
			out = append(out, l)
		}
	}
	if len(out) > 20 {
		out = out[:20]
	}
	return strings.Join(out, "\n")
}

// repeatedEvent holds once the object has a Warning of multicloud-ccm's
// (of reason, when not empty) seen at least twice: created, then patched.
func repeatedEvent(cp *framework.ControlPlane, kind, name, reason string) framework.Condition {
	return func(ctx context.Context) (bool, string, error) {
		ns := ""
		if kind == "Service" {
			ns = "default"
		}
		evs, err := framework.Events(ctx, cp.Client, kind, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, ev := range evs {
			if ev.Type == corev1.EventTypeWarning && ev.Source.Component == "multicloud-ccm" && ev.Count >= 2 && (reason == "" || ev.Reason == reason) {
				return true, "", nil
			}
		}
		return false, framework.DescribeEvents(evs), nil
	}
}

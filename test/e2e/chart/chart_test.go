// Package chart tests the Helm chart in charts/multicloud-ccm: lint, golden
// renderings, the values schema, the cloud-configs of the example values,
// server-side validation of every rendering against a real kube-apiserver,
// its RBAC proven by running the built CCM as the chart's ServiceAccount,
// and leader election between two replicas.
package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"

	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws"       // registers the aws section.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal" // registers the baremetal section.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/openstack" // registers the openstack section.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/vsphere"   // registers the vsphere section.
)

// rendering is one golden: a values file and extra helm arguments.
type rendering struct {
	name   string
	values string
	extra  []string
}

// renderings are every golden snapshot: each values file as is, and the HA
// one again on a cluster that serves ServiceMonitors.
func renderings(tb testing.TB) []rendering {
	tb.Helper()
	var rs []rendering
	for _, n := range valuesNames(tb) {
		rs = append(rs, rendering{name: n, values: n})
	}
	return append(rs, rendering{name: "ha-servicemonitor", values: "ha", extra: []string{"--api-versions", serviceMonitorAPI}})
}

func (r rendering) render(tb testing.TB) string {
	tb.Helper()
	return mustRender(tb, append([]string{"-f", valuesFile(r.values)}, r.extra...)...)
}

func TestLintStrict(t *testing.T) {
	for _, n := range valuesNames(t) {
		t.Run(n, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, err := runHelmOutputs(t, "lint", "--strict", chartDir(t), "-f", valuesFile(n), "--kube-version", kubeVersion, "--namespace", namespace)
			out := stdout + stderr
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			// helm lint only logs a template's fail(): catch it here.
			if strings.Contains(out, "Fail:") || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
				t.Errorf("helm lint reports problems:\n%s", out)
			}
		})
	}
}

// TestGolden compares each rendering with testdata/golden/<name>.yaml;
// go test -run TestGolden -update rewrites them.
func TestGolden(t *testing.T) {
	for _, r := range renderings(t) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			got := r.render(t)
			path := filepath.Join("testdata", "golden", r.name+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path) //nolint:gosec // Test data.
			if err != nil {
				t.Fatalf("%v (run go test ./test/e2e/chart -run TestGolden -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("rendering %s differs from %s (rerun with -update if the change is intended):\n%s", r.name, path, diff(string(want), got))
			}
		})
	}
}

// diff shows the first lines that differ.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  - " + wl + "\n  + " + gl + "\n")
			shown++
		}
	}
	return b.String()
}

// TestConfigsParse runs each rendered cloud-config through the binary's
// own parser (every backend type registered), so the examples a user
// copies are valid.
func TestConfigsParse(t *testing.T) {
	for _, n := range valuesNames(t) {
		t.Run(n, func(t *testing.T) {
			t.Parallel()
			objs := parse(t, mustRender(t, "-f", valuesFile(n)))
			cfg, err := configFromRendering(t, objs)
			if n == "existing-secrets" {
				if err == nil {
					t.Fatal("an existing config Secret must not render a Secret of its own")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := config.Parse([]byte(cfg), "/etc/multicloud-ccm/config"); err != nil {
				t.Fatalf("the rendered cloud-config does not parse: %v\n%s", err, cfg)
			}
		})
	}
}

// TestSchemaAndTemplateRejects checks that bad values fail with an error
// naming the value, before anything is rendered.
func TestSchemaAndTemplateRejects(t *testing.T) {
	tests := []struct {
		name    string
		values  string
		mention []string
	}{
		{"unknown top-level key", "replicas: 2", []string{"replicas"}},
		{"unknown nested key", "image: {tagg: v1}", []string{"tagg"}},
		{"misspelt section", "podDisruptionBudgett: {enabled: true}", []string{"podDisruptionBudgett"}},
		{"replicaCount as a string", `replicaCount: "3"`, []string{"replicaCount"}},
		{"replicaCount zero", `replicaCount: 0`, []string{"replicaCount"}},
		{"hostNetwork as a string", `hostNetwork: "yes"`, []string{"hostNetwork"}},
		{"unknown kind", `kind: StatefulSet`, []string{"kind"}},
		{"port out of range", `securePort: 70000`, []string{"securePort"}},
		{"arg as a map", `args: {feature-gates: {A: true}}`, []string{"feature-gates"}},
		{"arg name with dashes", `args: {"--v": 4}`, []string{"--v"}},
		{"bad digest", `image: {digest: "latest"}`, []string{"digest"}},
		{"credential without secretName", `credentials: [{name: aws}]`, []string{"secretName"}},
		{"credential folder not a DNS label", `credentials: [{name: AWS_Keys, secretName: x}]`, []string{"name"}},
		{"leader election as a string", `leaderElection: {enabled: "yes"}`, []string{"enabled"}},
		{"env entry without name", `env: [{value: x}]`, []string{"name"}},
		{"config of another kind", "config: {kind: Config}", []string{"/config/kind", "CloudConfig"}},
		{"config without backends", "config: {backends: null}", []string{"backends"}},
		{"config with an unknown backend type", "config: {backends: [{name: x, type: gcp}]}", []string{"/config/backends/0/type"}},
		{"config with a backend name that is not a DNS label", "config: {backends: [{name: X_1, type: aws}]}", []string{"/config/backends/0/name"}},
		{"admission policy action unknown", "admissionPolicy: {validationActions: [Refuse]}", []string{"validationActions"}},
		{"admission policy without actions", "admissionPolicy: {validationActions: []}", []string{"validationActions"}},
		{"admission policy failure policy", "admissionPolicy: {failurePolicy: Deny}", []string{"failurePolicy"}},
		{"admission policy backend not a DNS label", "admissionPolicy: {backends: [Metal_1]}", []string{"backends"}},
		// Template checks: values the schema cannot judge alone.
		{"leader election off with replicas", "replicaCount: 2\nleaderElection: {enabled: false}", []string{"leaderElection.enabled=false"}},
		{"leader election off with a DaemonSet", "kind: DaemonSet\nleaderElection: {enabled: false}", []string{"leaderElection.enabled=false"}},
		{"managed flag in args", `args: {cloud-config: /x}`, []string{"args.cloud-config"}},
		{"leader-elect in args", `args: {leader-elect: false}`, []string{"args.leader-elect", "leaderElection.enabled"}},
		{"no config at all", "config: null", []string{"config", "existingConfigSecret.name", "docs/configuration.md"}},
		{"both config and existing secret", `existingConfigSecret: {name: x}`, []string{"either config or existingConfigSecret.name"}},
		{"PDB blocking drains", "podDisruptionBudget: {minAvailable: 1}", []string{"minAvailable=1", "replicaCount=1"}},
		{"PDB with both", "replicaCount: 3\npodDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}", []string{"not both"}},
		{"ServiceAccount not created and not named", "serviceAccount: {create: false}", []string{"serviceAccount.name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bad := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(bad, []byte(tt.values+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := render(t, "-f", valuesFile("minimal"), "-f", bad)
			if err == nil {
				t.Fatalf("values %q rendered; want an error mentioning %v. Output:\n%.2000s", tt.values, tt.mention, out)
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error does not mention %q:\n%v", m, err)
				}
			}
		})
	}
}

// TestRenderedPolicy checks properties every rendering must have.
func TestRenderedPolicy(t *testing.T) {
	for _, r := range renderings(t) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			objs := parse(t, r.render(t))
			w := workload(t, objs)
			pod := get(w, "spec", "template", "spec")
			args := containerArgs(t, objs)

			// Leader election whenever more than one pod can run.
			le, _ := flagValue(args, "leader-elect")
			if le != "true" {
				t.Errorf("--leader-elect=%q; every example can run more than one pod at once (DaemonSet, replicas or a rolling update)", le)
			}
			if _, ok := flagValue(args, "cloud-provider"); !ok {
				t.Error("no --cloud-provider")
			}
			if v, _ := flagValue(args, "cloud-config"); v != "/etc/multicloud-ccm/config/cloud-config.yaml" {
				t.Errorf("--cloud-config=%q", v)
			}
			// Restricted security context.
			if get(pod, "securityContext", "runAsNonRoot") != true || get(pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
				t.Errorf("pod securityContext %v: want runAsNonRoot and seccomp RuntimeDefault", get(pod, "securityContext"))
			}
			c := get(pod, "containers", 0)
			if get(c, "securityContext", "readOnlyRootFilesystem") != true || get(c, "securityContext", "allowPrivilegeEscalation") != false ||
				!slices.Equal(toStrings(get(c, "securityContext", "capabilities", "drop")), []string{"ALL"}) {
				t.Errorf("container securityContext %v: want read-only root, no privilege escalation, drop ALL", get(c, "securityContext"))
			}
			if get(pod, "priorityClassName") != "system-cluster-critical" {
				t.Errorf("priorityClassName %v", get(pod, "priorityClassName"))
			}
			// Probes on the secure port's /healthz over HTTPS: readiness
			// with the backends' check, liveness without it (an outage
			// must never restart the pod).
			for p, path := range map[string]string{"livenessProbe": "/healthz?exclude=backend-health", "readinessProbe": "/healthz"} {
				if get(c, p, "httpGet", "path") != path || get(c, p, "httpGet", "scheme") != "HTTPS" || get(c, p, "httpGet", "port") != "https" {
					t.Errorf("%s %v: want HTTPS GET %s on the secure port", p, get(c, p), path)
				}
			}
			// Tolerations for uninitialised and control-plane nodes.
			var keys []string
			for _, tol := range get(pod, "tolerations").([]any) {
				keys = append(keys, get(tol, "key").(string))
			}
			for _, k := range []string{"node.cloudprovider.kubernetes.io/uninitialized", "node-role.kubernetes.io/control-plane"} {
				if !slices.Contains(keys, k) {
					t.Errorf("no toleration for %s (have %v)", k, keys)
				}
			}
			if get(w, "spec", "template", "metadata", "annotations", "checksum/config") == nil {
				t.Error("no checksum/config annotation on the pod template")
			}
			// RBAC: no wildcard, nothing bound to cluster-admin.
			for _, o := range objs {
				switch o.kind() {
				case "ClusterRole", "Role":
					for _, rule := range get(o, "rules").([]any) {
						for _, f := range []string{"apiGroups", "resources", "verbs", "resourceNames"} {
							if slices.Contains(toStrings(get(rule, f)), "*") {
								t.Errorf("%s %s has a wildcard in %s: %v", o.kind(), o.name(), f, rule)
							}
						}
					}
				case "ClusterRoleBinding", "RoleBinding":
					if ref := get(o, "roleRef", "name"); ref == "cluster-admin" || ref == "admin" || ref == "edit" {
						t.Errorf("%s %s binds %v", o.kind(), o.name(), ref)
					}
				}
			}
			// PDB always; ServiceMonitor only when its API is served.
			find(t, objs, "PodDisruptionBudget", "")
			sm := 0
			for _, o := range objs {
				if o.kind() == "ServiceMonitor" {
					sm++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[r.name == "ha-servicemonitor"]; sm != want {
				t.Errorf("%d ServiceMonitors, want %d", sm, want)
			}
		})
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestChecksumFollowsConfig: changing the config changes the pod template
// (so the pods roll); changing nothing keeps it.
func TestChecksumFollowsConfig(t *testing.T) {
	sum := func(extra ...string) any {
		objs := parse(t, mustRender(t, append([]string{"-f", valuesFile("minimal")}, extra...)...))
		return get(workload(t, objs), "spec", "template", "metadata", "annotations", "checksum/config")
	}
	a, b := sum(), sum()
	c := sum("--set", "config.clusterID=prod-2")
	if a != b {
		t.Errorf("same values, different checksums %v and %v", a, b)
	}
	if a == c {
		t.Errorf("config.clusterID changed but the checksum stayed %v", a)
	}
}

// TestLeaderElectionRule: one replica with Recreate is the only shape
// where leader election may be off; auto turns it off there.
func TestLeaderElectionRule(t *testing.T) {
	tests := []struct {
		set  []string
		want string
	}{
		{nil, "true"}, // one replica, but a rolling update runs two pods
		{[]string{"updateStrategy.type=Recreate"}, "false"},
		{[]string{"updateStrategy.type=Recreate", "leaderElection.enabled=true"}, "true"},
		{[]string{"replicaCount=2", "updateStrategy.type=Recreate"}, "true"},
		{[]string{"kind=DaemonSet", "updateStrategy.type=OnDelete"}, "true"},
	}
	for _, tt := range tests {
		var args []string
		for _, s := range tt.set {
			args = append(args, "--set", s)
		}
		objs := parse(t, mustRender(t, append([]string{"-f", valuesFile("minimal")}, args...)...))
		if got, _ := flagValue(containerArgs(t, objs), "leader-elect"); got != tt.want {
			t.Errorf("%v: --leader-elect=%s, want %s", tt.set, got, tt.want)
		}
		hasLeaseRole := false
		for _, o := range objs {
			if o.kind() == "Role" && strings.HasSuffix(o.name(), "-leader-election") {
				hasLeaseRole = true
			}
		}
		if hasLeaseRole != (tt.want == "true") {
			t.Errorf("%v: leader-election Role rendered=%v with --leader-elect=%s", tt.set, hasLeaseRole, tt.want)
		}
	}
}

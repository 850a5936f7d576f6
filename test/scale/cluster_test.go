package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

const (
	// ccmSA is the ServiceAccount the CCM runs as; its controllers, with
	// --use-service-account-credentials, act as their own ServiceAccounts in
	// kube-system. The audit policy records exactly those users.
	ccmSA = "multicloud-ccm"
	// kwokAnnotation marks the nodes kwok keeps Ready.
	kwokAnnotation = "kwok.x-k8s.io/node"
	region         = "eu-west-1"
	clusterID      = "scale"
	svcNS          = "scale"
)

// chartFlags are the chart's args (charts/multicloud-ccm/values.yaml)
// beside the ones the framework sets for every CCM. The benchmark's CCM
// runs alone, so leader election stays off, as the chart has it for one
// replica.
var chartFlags = []string{
	"--use-service-account-credentials=true",
	"--configure-cloud-routes=false",
	"--node-status-update-frequency=5m",
	"--kube-api-qps=200",
	"--kube-api-burst=400",
	"--concurrent-service-syncs=10",
	"--v=2",
	// The framework's short test periods, put back to the binary's
	// defaults: a benchmark measures what a cluster runs.
	"--node-monitor-period=5s",
}

// auditPolicy records, at Metadata level, every request of the CCM's
// ServiceAccounts (all in kube-system), and nothing else: the test's own
// requests and kwok's are not the CCM's cost.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:kube-system"]
- level: None
`

// kwokConfig keeps the nodes Ready with conditions only: kwok never writes
// addresses (the CCM owns them, as with a kubelet run with
// --cloud-provider=external), and heartbeats come every few minutes, so
// 5,000 nodes fit on 2 cores beside the API server and etcd.
const kwokConfig = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: node-ready}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
        message: kwok keeps this node Ready
        reason: KubeletReady
        status: "True"
        type: Ready
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: node-heartbeat}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: In
      values: ["True"]
  delay:
    durationMilliseconds: 240000
    jitterDurationMilliseconds: 60000
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
        message: kwok keeps this node Ready
        reason: KubeletReady
        status: "True"
        type: Ready
  immediateNextStage: true
`

// cluster is one run's control plane, kwok, cloud and CCM.
type cluster struct {
	cp     *framework.ControlPlane
	client kubernetes.Interface
	ccm    *framework.CCM
	fake   *awsfake.Running
	audit  string
	kwok   *framework.Process
	cell   cell
	names  []string // node names, in order
	nodeOf func(i int) *corev1.Node
}

// startCluster starts the control plane (audit log on), kwok and, for the
// aws cloud, the fake with an instance for every node.
func startCluster(t *testing.T, c cell, dir string) *cluster {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	cl := &cluster{cell: c, audit: filepath.Join(dir, "audit.log")}
	bins := framework.RequireBinaries(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := framework.StartControlPlane(ctx, framework.ControlPlaneOptions{Binaries: bins, Dir: dir, ExtraAPIServerArgs: []string{
		"--audit-policy-file=" + policy, "--audit-log-path=" + cl.audit, "--audit-log-format=json",
		"--audit-log-mode=batch", "--audit-log-maxsize=0",
		// Without it the CCM's delegated authentication logs "missing
		// content for CA bundle" about once a minute.
		"--requestheader-client-ca-file=" + filepath.Join(dir, "ca.crt"), "--requestheader-allowed-names=front-proxy-client",
		"--service-node-port-range=20000-32767",
		"--max-requests-inflight=800", "--max-mutating-requests-inflight=400",
	}})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(true); err != nil {
			t.Logf("stop control plane: %v", err)
		}
	})
	cl.cp = cp
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS = -1 // the benchmark's own requests are not the bottleneck
	cl.client = kubernetes.NewForConfigOrDie(cfg)
	cl.grantKubeSystem(ctx, t)
	cl.kwok = startKwok(t, cp, dir)
	cl.setupCloud(t)
	if _, err := cl.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: svcNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cl
}

// grantKubeSystem binds cluster-admin to every ServiceAccount in
// kube-system: the CCM's and its controllers' (the chart grants each
// controller less; the benchmark measures load, not RBAC).
func (cl *cluster) grantKubeSystem(ctx context.Context, t *testing.T) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scale-kube-system"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:serviceaccounts:kube-system"}},
	}
	if _, err := cl.client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// startKwok runs kwok (make bench-scale builds it into _output/tools/bin;
// KWOK_BIN overrides) against the control plane as admin.
func startKwok(t *testing.T, cp *framework.ControlPlane, dir string) *framework.Process {
	t.Helper()
	bin := os.Getenv("KWOK_BIN")
	if bin == "" {
		bin = framework.OutputFiles(t, "KWOK_DIR", "tools/bin", "bench-scale", "kwok")[0]
	}
	conf := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(conf, []byte(kwokConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := framework.StartProcess(framework.ProcessOptions{
		Name: "kwok", Path: bin,
		Args: []string{"--config=" + conf, "--kubeconfig=" + cp.AdminKubeconfig,
			"--manage-nodes-with-annotation-selector=" + kwokAnnotation + "=fake",
			"--node-lease-duration-seconds=0",
			fmt.Sprintf("--server-address=127.0.0.1:%d", port), "-v=WARN"},
		Env:     append(os.Environ(), "HOME="+dir),
		LogPath: filepath.Join(dir, "kwok.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Logf("stop kwok: %v\n%s", err, p.LogTail(40))
		}
	})
	return p
}

// setupCloud prepares the nodes' names and shapes and, for aws, the fake
// with one running instance per node.
func (cl *cluster) setupCloud(t *testing.T) {
	t.Helper()
	n := cl.cell.nodes
	cl.names = make([]string, n)
	switch cl.cell.cloud {
	case "aws":
		fake, err := awsfake.New(region).Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fake.Close() })
		cl.fake = fake
		fake.SetRulesPerSecurityGroup(awsRulesQuota)
		if awsThrottle() {
			limits := awsfake.AWSRateLimits
			fake.SetRateLimits(&limits)
		}
		seeded := fake.Seed(awsfake.SeedSpec{ClusterID: clusterID, NodeSecurityGroup: true})
		zones := []string{region + "a", region + "b"}
		ids := make([]string, n)
		for i := range n {
			z := i % 2
			ip := awsNodeIP(i)
			cl.names[i] = fmt.Sprintf("ip-%s.%s.compute.internal", strings.ReplaceAll(ip, ".", "-"), region)
			ids[i] = fmt.Sprintf("i-%017x", 0xa0000+i)
			fake.AddInstance(awsfake.Instance{ID: ids[i], InstanceType: "m5.large", Zone: zones[z], ZoneID: fmt.Sprintf("euw1-az%d", z+1),
				VPCID: seeded.VPCID, SubnetID: seeded.PrivateSubnets[z], State: "running", PrivateIPs: []string{ip},
				PrivateDNSName: cl.names[i], SourceDestCheck: true, SecurityGroups: []string{seeded.NodeSecurityGroup},
				Tags: map[string]string{"kubernetes.io/cluster/" + clusterID: "owned"}})
		}
		cl.nodeOf = func(i int) *corev1.Node {
			// As EKS's kubelet registers: the providerID set.
			node := newNode(cl.names[i], fmt.Sprintf("aws:///%s/%s", zones[i%2], ids[i]))
			if n > awsTargetQuota && i < awsTargetQuota {
				node.Labels[awsTargetLabel] = "true"
			}
			return node
		}
	default:
		for i := range n {
			cl.names[i] = fmt.Sprintf("node-%05d", i)
		}
		cl.nodeOf = func(i int) *corev1.Node { return newNode(cl.names[i], "") }
	}
}

// AWS's default quota is 1,000 targets per target group (and 3,000 per
// NLB, 500 per zone: "Quotas for your Network Load Balancers"): an NLB over
// every node of a larger cluster is refused. Above it, the first
// awsTargetQuota nodes (half in each zone) carry awsTargetLabel, and every
// Service targets them alone with aws-load-balancer-target-node-labels, as
// an operator of such a cluster must. Node 0, the one the node-sync phase
// excludes, is among them.
const (
	awsTargetQuota = 1000
	awsTargetLabel = "scale.multicloud-ccm.io/lb-target"
)

// Each instance-target Service adds one rule (its NodePort, from its NLB's
// security group) to the nodes' security group, whose "Inbound or outbound
// rules per security group" quota is 60 by default and at most 1,000 (its
// product with "Security groups per network interface", 5 by default,
// cannot exceed 1,000: Amazon VPC quotas). The fake is set to that
// maximum; above it every Service sets awsBackendRules to "false", and the
// nodes' group would allow the NodePort range from the VPC instead, as an
// operator of such a cluster must.
const (
	awsRulesQuota   = 1000
	awsBackendRules = "service.beta.kubernetes.io/aws-load-balancer-manage-backend-security-group-rules"
)

// serviceTweaks are the cell's Service settings beyond the benchmark's
// defaults: the target subset on AWS above its target quota, IP targets
// when the cell asks for them, and no rules in the nodes' security group
// for more instance-target Services than it can hold.
func (cl *cluster) serviceTweaks() []framework.ServiceTweak {
	var out []framework.ServiceTweak
	if cl.cell.cloud == "aws" && cl.cell.nodes > awsTargetQuota {
		out = append(out, framework.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-target-node-labels", awsTargetLabel+"=true"))
	}
	if cl.cell.ipTargets {
		out = append(out, framework.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-nlb-target-type", "ip"))
	}
	if cl.cell.cloud == "aws" && !cl.cell.ipTargets && cl.cell.services > awsRulesQuota {
		out = append(out, framework.WithAnnotation(awsBackendRules, "false"))
	}
	return out
}

// newNode is a node as a kubelet with --cloud-provider=external registers
// it (tainted uninitialised, no addresses), not yet Ready: kwok makes it so.
func newNode(name, providerID string) *corev1.Node {
	n := framework.NewNode(name, framework.WithProviderID(providerID))
	n.Status.Conditions = nil
	n.Annotations = map[string]string{kwokAnnotation: "fake"}
	return n
}

// nodeIP is node i's address in bare metal's inventory: 10.1.0.1 upwards.
func nodeIP(i int) string { return fmt.Sprintf("10.1.%d.%d", i/250, i%250+1) }

// awsNodeIP is aws instance i's private address: 10.0.100.1 upwards, in
// the seeded VPC (10.0.0.0/16) as AWS assigns them; an NLB's IP targets
// must be in its VPC (or carry zone "all").
func awsNodeIP(i int) string { return fmt.Sprintf("10.0.%d.%d", 100+i/250, i%250+1) }

// cloudConfig is the CCM's cloud-config for the cell.
func (cl *cluster) cloudConfig() string { return cl.cloudConfigWith(awsRateLimits()) }

// cloudConfigWith is the cloud-config with the aws section's rateLimits
// line rateLimits ("" for the backend's default budget).
func (cl *cluster) cloudConfigWith(rateLimits string) string {
	if cl.cell.cloud == "aws" {
		return fmt.Sprintf(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: %[3]s
loadBalancer: {defaultBackend: aws}
backends:
- name: aws
  type: aws
  aws:
    region: %[4]s
    vpc: vpc-0e7a3f1c
    endpoints: {ec2: %[1]q, elbv2: %[1]q, sts: %[1]q}
    credentials:
      accessKeyID: {env: SCALE_AWS_ACCESS_KEY_ID}
      secretAccessKey: {env: SCALE_AWS_SECRET_ACCESS_KEY}
%[2]s`, cl.fake.URL, rateLimits, clusterID, region)
	}
	var b strings.Builder
	b.WriteString(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: ` + clusterID + `
loadBalancer: {defaultBackend: metal}
backends:
- name: metal
  type: baremetal
  baremetal:
    addressPools: [{name: lan, addresses: ["10.200.0.0/16"]}]
    inventory:
`)
	for i, name := range cl.names {
		fmt.Fprintf(&b, "    - {name: %s, addresses: [{type: InternalIP, address: %s}]}\n", name, nodeIP(i))
	}
	return b.String()
}

// awsThrottle is SCALE_AWS_THROTTLE=aws: the fake throttles as AWS does,
// with AWS's documented buckets (awsfake.AWSRateLimits), so the cells
// measure the CCM against the cloud's own limits, not only its budget.
func awsThrottle() bool { return strings.TrimSpace(os.Getenv("SCALE_AWS_THROTTLE")) == "aws" }

// awsRateLimits is the aws section's rateLimits line from
// SCALE_AWS_RATE_LIMITS (a YAML flow map, e.g. "{elbv2: {qps: -1,
// qpsWrite: -1}}"); empty, the backend's default budget.
func awsRateLimits() string { return rateLimitsLine(os.Getenv("SCALE_AWS_RATE_LIMITS")) }

func rateLimitsLine(v string) string {
	v = strings.TrimSpace(v)
	if v == "" || v == "default" {
		return ""
	}
	return "    rateLimits: " + v + "\n"
}

// syncRateLimits is SCALE_AWS_RATE_LIMITS_SYNC: the rateLimits the aws
// cells switch to, by a live reload of the cloud-config, just before the
// node-sync phase ("default": the backend's default budget; a YAML flow
// map as SCALE_AWS_RATE_LIMITS), and whether it is set. With
// SCALE_AWS_RATE_LIMITS off, the NLBs are created at the fake's speed and
// the node sync runs under the budget: 1,000 NLBs in a minute or two
// instead of the default budget's hour.
func syncRateLimits() (string, bool) {
	v := strings.TrimSpace(os.Getenv("SCALE_AWS_RATE_LIMITS_SYNC"))
	return rateLimitsLine(v), v != ""
}

// startCCM runs the built binary with the chart's flags as the CCM's
// ServiceAccount.
func (cl *cluster) startCCM(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc, err := cl.cp.ServiceAccountKubeconfig(ctx, "kube-system", ccmSA)
	if err != nil {
		t.Fatal(err)
	}
	// SCALE_CCM_ARGS adds or overrides flags, e.g. --controllers=*,service
	// to serve classless Services with upstream's service controller.
	args := slices.Clone(chartFlags)
	if len(profilePhases()) > 0 {
		// The upstream default, said: SCALE_CCM_PROFILE reads /debug/pprof.
		args = append(args, "--profiling=true")
	}
	args = append(args, strings.Fields(os.Getenv("SCALE_CCM_ARGS"))...)
	cl.ccm = cl.cp.StartCCMT(t, framework.CCMOptions{
		CloudConfig: cl.cloudConfig(), Kubeconfig: kc, ExtraArgs: args, ReadyTimeout: 2 * time.Minute,
		Env: []string{"SCALE_AWS_ACCESS_KEY_ID=AKIDSCALE", "SCALE_AWS_SECRET_ACCESS_KEY=scale-secret", "AWS_EC2_METADATA_DISABLED=true"},
	})
}

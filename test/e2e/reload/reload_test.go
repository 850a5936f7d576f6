package reload

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

const (
	region    = "eu-west-1"
	clusterID = "e2e-reload"
	ns        = "default"
	settle    = 30 * time.Second
	// applyWithin is how soon a changed file must be applied: the CCM
	// checks every 500ms here.
	applyWithin = 10 * time.Second
)

var (
	publicPool = netip.MustParsePrefix("192.0.2.0/28")
	extraPool  = netip.MustParsePrefix("203.0.113.0/28")
)

// configFor renders the cloud-config: the aws backend with its credentials
// in the files ak and sk beside the config, and the bare-metal backend with
// the inventory and pools given (YAML flow lists).
func configFor(awsURL, vpc, inventory, pools string, withAWS bool) string {
	c := `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: ` + clusterID + `
loadBalancer: {defaultBackend: metal}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: ` + inventory + `
    addressPools: ` + pools + `
`
	if withAWS {
		c += fmt.Sprintf(`- name: aws
  type: aws
  aws:
    region: %s
    vpc: %s
    endpoints: {ec2: %q, elbv2: %q, sts: %q}
    credentials:
      accessKeyID: {file: ak}
      secretAccessKey: {file: sk}
    instanceCacheTTL: 1s
    retry: {maxAttempts: 2, maxBackoff: 100ms}
`, region, vpc, awsURL, awsURL, awsURL)
	}
	return c
}

// mount is a folder laid out as the kubelet lays out a mounted Secret:
// every file is a symlink into ..data, itself a symlink to a versioned
// folder; an update writes a new version and renames a new ..data symlink
// over the old one, so readers see all the new files at once.
type mount struct {
	dir string
	seq int
}

func (m *mount) write(t *testing.T, files map[string]string) {
	t.Helper()
	m.seq++
	ver := fmt.Sprintf("..v%d", m.seq)
	if err := os.Mkdir(filepath.Join(m.dir, ver), 0o750); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(m.dir, ver, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(m.dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(ver, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// metric returns the value of the sample named exactly name (with its
// labels, if any) on the CCM's /metrics, or "".
func metric(ctx context.Context, t *testing.T, ccm *framework.CCM, name string) string {
	t.Helper()
	code, body, err := ccm.Get(ctx, "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

func metricIs(ctx context.Context, t *testing.T, ccm *framework.CCM, name, want string) framework.Condition {
	return func(context.Context) (bool, string, error) {
		got := metric(ctx, t, ccm, name)
		return got == want, fmt.Sprintf("%s = %q", name, got), nil
	}
}

func ingressIn(pool netip.Prefix) framework.ServiceCondition {
	return func(s *corev1.Service) (bool, string) {
		ips := framework.IngressIPs(s)
		if len(ips) != 1 {
			return false, fmt.Sprintf("ingress %v", ips)
		}
		ip, err := netip.ParseAddr(ips[0])
		return err == nil && pool.Contains(ip), fmt.Sprintf("ingress %v", ips)
	}
}

// TestLiveReload drives one CCM through a credential rotation under load,
// an added pool and machine, a broken file, its fix and a removed backend,
// without a restart.
func TestLiveReload(t *testing.T) {
	cp := suite.ControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	fake := awsfake.New(region)
	seeded := fake.Seed(awsfake.SeedSpec{ClusterID: clusterID, Instances: 2})
	fake.SetAccessKeys("AKIDOLD")
	running, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = running.Close() }()

	m := &mount{dir: t.TempDir()}
	inv1 := `[{name: bm-1, addresses: [{type: InternalIP, address: 10.0.0.11}]}]`
	pools1 := `[{name: public, addresses: ["192.0.2.0/28"]}]`
	m.write(t, map[string]string{
		"cloud-config.yaml": configFor(running.URL, seeded.VPCID, inv1, pools1, true),
		"ak":                "AKIDOLD", "sk": "old-secret",
	})
	ccm := cp.StartCCMT(t, framework.CCMOptions{
		Name: "reload",
		ExtraArgs: []string{
			"--cloud-config=" + filepath.Join(m.dir, "cloud-config.yaml"),
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
	hash0 := metric(ctx, t, ccm, "multicloud_ccm_config_hash")

	// Load: two AWS nodes. The lifecycle controller asks about them every
	// second (they never report Ready), the node controller every 5s.
	for _, in := range seeded.Instances {
		node := framework.NewNode(in.PrivateDNSName, framework.WithProviderID(fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)))
		if _, err := framework.CreateNode(ctx, cp.Client, node); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settle, "AWS node "+node.Name+" initialised", framework.NodeMatches(cp.Client, node.Name, func(n *corev1.Node) (bool, string) {
			return !framework.HasTaint(n, framework.UninitializedTaint), fmt.Sprintf("taints %v", n.Spec.Taints)
		}))
	}

	t.Run("credential rotated under load", func(t *testing.T) {
		fake.SetAccessKeys("AKIDOLD", "AKIDNEW") // the new key is created first, as in IAM
		start := time.Now()
		m.write(t, map[string]string{
			"cloud-config.yaml": configFor(running.URL, seeded.VPCID, inv1, pools1, true),
			"ak":                "AKIDNEW", "sk": "new-secret",
		})
		framework.Eventually(t, applyWithin, "the new key in use", func(context.Context) (bool, string, error) {
			k := fake.LastAccessKey("DescribeInstances")
			return k == "AKIDNEW", "last key " + k, nil
		})
		t.Logf("reload-to-applied (credential rotation): %v", time.Since(start).Round(time.Millisecond))
		fake.SetAccessKeys("AKIDNEW") // the old key is deactivated
		calls := fake.Calls("DescribeInstances")
		time.Sleep(6 * time.Second)
		if got := fake.Calls("DescribeInstances"); got <= calls {
			t.Errorf("no DescribeInstances in 6s after the rotation (%d before, %d after): no load", calls, got)
		}
		if r := fake.Rejected(); r != 0 {
			t.Errorf("%d calls were refused for their key: a call failed across the rotation", r)
		}
		if got := metric(ctx, t, ccm, "multicloud_ccm_config_hash"); got == hash0 {
			t.Errorf("config hash %s unchanged after the rotation", got)
		}
	})

	inv2 := `[{name: bm-1, addresses: [{type: InternalIP, address: 10.0.0.11}]}, {name: bm-2, addresses: [{type: InternalIP, address: 10.0.0.12}]}]`
	pools2 := `[{name: public, addresses: ["192.0.2.0/28"]}, {name: extra, addresses: ["203.0.113.0/28"], autoAssign: false}]`
	t.Run("pool and machine added", func(t *testing.T) {
		m.write(t, map[string]string{
			"cloud-config.yaml": configFor(running.URL, seeded.VPCID, inv2, pools2, true),
			"ak":                "AKIDNEW", "sk": "new-secret",
		})
		framework.Eventually(t, applyWithin, "reload applied", metricIs(ctx, t, ccm, `multicloud_ccm_config_reloads_total{result="success"}`, "2"))
		if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("bm-2")); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settle, "bm-2 initialised", framework.NodeMatches(cp.Client, "bm-2", func(n *corev1.Node) (bool, string) {
			return n.Spec.ProviderID == "baremetal://bm-2" && !framework.HasTaint(n, framework.UninitializedTaint), "providerID " + n.Spec.ProviderID
		}))
		if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService(ns, "in-extra",
			framework.WithAnnotation("multicloud-ccm.io/address-pool", "extra"))); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settle, "in-extra gets an address of the added pool", framework.ServiceMatches(cp.Client, ns, "in-extra", ingressIn(extraPool)))
	})

	t.Run("broken file keeps the configuration in use", func(t *testing.T) {
		hash := metric(ctx, t, ccm, "multicloud_ccm_config_hash")
		broken := strings.Replace(configFor(running.URL, seeded.VPCID, inv2, pools2, true), `"203.0.113.0/28"`, `"203.0.113.300/28"`, 1)
		broken = strings.Replace(broken, "clusterID:", "loadBalancr: {}\nclusterID:", 1)
		m.write(t, map[string]string{"cloud-config.yaml": broken, "ak": "AKIDNEW", "sk": "new-secret"})
		framework.Eventually(t, applyWithin, "failure reported in the metric", metricIs(ctx, t, ccm, "multicloud_ccm_config_last_reload_successful", "0"))
		framework.Eventually(t, settle, "Warning event naming every problem", func(ctx context.Context) (bool, string, error) {
			evs, err := framework.Events(ctx, cp.Client, "Namespace", "", "kube-system")
			if err != nil {
				return false, "", err
			}
			e := framework.FindEvent(evs, corev1.EventTypeWarning, "CloudConfigReloadFailed")
			return e != nil && strings.Contains(e.Message, "backends[0].baremetal.addressPools[1].addresses[0]") && strings.Contains(e.Message, "loadBalancr"),
				framework.DescribeEvents(evs), nil
		})
		if got := metric(ctx, t, ccm, "multicloud_ccm_config_hash"); got != hash {
			t.Errorf("config hash changed from %s to %s on a broken file", hash, got)
		}
		if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService(ns, "while-broken",
			framework.WithAnnotation("multicloud-ccm.io/address-pool", "extra"))); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settle, "while-broken served by the configuration in use", framework.ServiceMatches(cp.Client, ns, "while-broken", ingressIn(extraPool)))
	})

	t.Run("fixed file applied", func(t *testing.T) {
		m.write(t, map[string]string{"cloud-config.yaml": configFor(running.URL, seeded.VPCID, inv2, pools2, true), "ak": "AKIDNEW", "sk": "new-secret"})
		framework.Eventually(t, applyWithin, "success reported in the metric", metricIs(ctx, t, ccm, "multicloud_ccm_config_last_reload_successful", "1"))
	})

	t.Run("removed backend deletes none of its nodes", func(t *testing.T) {
		m.write(t, map[string]string{"cloud-config.yaml": configFor(running.URL, seeded.VPCID, inv2, pools2, false), "ak": "AKIDNEW", "sk": "new-secret"})
		framework.Eventually(t, applyWithin, "reload applied", metricIs(ctx, t, ccm, `multicloud_ccm_config_reloads_total{result="success"}`, "4"))
		framework.Consistently(t, 7*time.Second, "the AWS nodes stay", func(ctx context.Context) (bool, string, error) {
			for _, in := range seeded.Instances {
				if _, err := cp.Client.CoreV1().Nodes().Get(ctx, in.PrivateDNSName, metav1.GetOptions{}); err != nil {
					return false, err.Error(), nil
				}
			}
			return true, "", nil
		})
		framework.Eventually(t, settle, "bare-metal allocations still served", framework.ServiceMatches(cp.Client, ns, "in-extra", ingressIn(extraPool)))
		if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService(ns, "after-removal")); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settle, "a new Service served", framework.ServiceMatches(cp.Client, ns, "after-removal", ingressIn(publicPool)))
	})
}

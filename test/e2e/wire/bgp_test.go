package wire

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/netns"
)

const (
	nodeASN   = 64512
	routerASN = 64513
	routerIP  = "10.77.0.1"
	// EnvGoBGP names the folder holding gobgpd and gobgp (default
	// _output/gobgp, where hack/gobgp/build.sh puts them).
	EnvGoBGP = "GOBGP_DIR"
)

// metallbBGPConfig is MetalLB's pool for the CCM's addresses (autoAssign
// off) advertised by BGP to the router.
var metallbBGPConfig = fmt.Sprintf(`apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: lan, namespace: %[1]s}
spec:
  addresses: [%[2]q]
  autoAssign: false
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router, namespace: %[1]s}
spec: {myASN: %[3]d, peerASN: %[4]d, peerAddress: %[5]s}
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: lan, namespace: %[1]s}
spec:
  ipAddressPools: [lan]
`, metallbNS, pool4, nodeASN, routerASN, routerIP)

// gobgpConfig makes the router namespace's GoBGP peer with the node.
var gobgpConfig = fmt.Sprintf(`[global.config]
  as = %d
  router-id = %q
[[neighbors]]
  [neighbors.config]
    neighbor-address = "10.77.0.2"
    peer-as = %d
`, routerASN, routerIP, nodeASN)

// TestMetalLBSpeakerAdvertisesOurAddressesByBGP: a Service gets an IPv4
// address from the CCM; MetalLB's speaker in the node namespace, in BGP
// mode, peers with GoBGP in a "router" namespace on the same bridge, which
// then holds a /32 route to the address via the node — none before the
// speaker runs, and none once the Service is deleted.
func TestMetalLBSpeakerAdvertisesOurAddressesByBGP(t *testing.T) {
	lan := netns.Require(t)
	speaker, crds := metallb(t)
	gobgpd, gobgp := gobgpBinaries(t)
	node, err := lan.AddHost("node", "10.77.0.2/24")
	if err != nil {
		t.Fatal(err)
	}
	router, err := lan.AddHost("router", routerIP+"/24")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	startGoBGP(t, router, gobgpd, gobgp)
	cp := startCluster(ctx, t, crds, metallbBGPConfig)
	addr := addressed(ctx, t, cp, framework.NewLoadBalancerService("default", "web", framework.WithPort("http", 80, corev1.ProtocolTCP)), 1)[0]
	route := func() string {
		t.Helper()
		out, err := router.Run(gobgp, "--host", "127.0.0.1", "--port", "50051", "global", "rib", "-a", "ipv4")
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(out, "\n") {
			if strings.Contains(line, addr+"/32") {
				return strings.Join(strings.Fields(line), " ")
			}
		}
		return ""
	}
	if r := route(); r != "" {
		t.Fatalf("the router holds a route to %s before any speaker ran: %s", addr, r)
	}

	startSpeaker(t, cp, node, speaker)
	framework.Eventually(t, 90*time.Second, "a route to the address via the node", func(context.Context) (bool, string, error) {
		r := route()
		return strings.Contains(r, " 10.77.0.2 ") && strings.Contains(r, fmt.Sprint(nodeASN)), "route: " + r, nil
	})
	t.Logf("GoBGP's RIB: %s", route())

	if err := cp.Client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the route withdrawn", func(context.Context) (bool, string, error) {
		r := route()
		return r == "", "route: " + r, nil
	})
}

// gobgpBinaries returns gobgpd and gobgp, skipping (failing in CI) when
// hack/gobgp/build.sh has not run.
func gobgpBinaries(t *testing.T) (daemon, cli string) {
	t.Helper()
	p := framework.OutputFiles(t, EnvGoBGP, "gobgp", "gobgp", "gobgpd", "gobgp")
	return p[0], p[1]
}

// startGoBGP runs gobgpd in the router namespace, its API on that
// namespace's loopback, and waits until the API answers.
func startGoBGP(t *testing.T, router *netns.Host, gobgpd, gobgp string) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "gobgpd.toml")
	if err := os.WriteFile(conf, []byte(gobgpConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	path, args := router.Command(gobgpd, "-f", conf, "-t", "toml", "--api-hosts=127.0.0.1:50051", "--pprof-disable")
	p, err := framework.StartProcess(framework.ProcessOptions{
		Name: "gobgpd", Path: path, Args: args, LogPath: filepath.Join(dir, "gobgpd.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(10 * time.Second)
		if t.Failed() {
			t.Log(p.LogTail(framework.LogLines))
		}
	})
	framework.Eventually(t, time.Minute, "GoBGP's API", func(context.Context) (bool, string, error) {
		if exited, err := p.Exited(); exited {
			return false, "", fmt.Errorf("gobgpd exited (%w):\n%s", err, p.LogTail(framework.LogLines))
		}
		out, err := router.Run(gobgp, "--host", "127.0.0.1", "--port", "50051", "global")
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.Contains(out, fmt.Sprint(routerASN)), out, nil
	})
}

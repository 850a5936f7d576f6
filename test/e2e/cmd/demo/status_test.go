package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/statuspublisher"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestStatus runs `multicloud-ccm status` from the built binary against
// the demo's cluster on a real kube-apiserver: its three backends (bare
// metal, vSphere at the vCenter simulator, AWS at the EC2/ELBv2 fake), its
// nodes and Services, settled. Then AWS stops accepting the demo's access
// key (as when a key is deactivated) and a new Service asks AWS for a load
// balancer: the published status shows aws down with an auth error, and
// status prints it. The whole table output, with ages, the error's text and
// the simulators' random IDs normalised, is compared with
// testdata/status.golden (-update rewrites it).
func TestStatus(t *testing.T) {
	cp := framework.StartControlPlaneT(t)
	framework.RequireBinaries(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := startClouds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.close() })
	cp.StartCCMT(t, framework.CCMOptions{Name: "multicloud-ccm", CloudConfig: c.cloudConfig(), Env: c.env()})
	if err := createObjects(ctx, cp, c); err != nil {
		t.Fatal(err)
	}
	if err := waitSettled(ctx, cp, c, 90*time.Second); err != nil {
		t.Fatal(err)
	}

	c.aws.SetAccessKeys("AKIDSOMEONEELSE")
	checkout := framework.NewLoadBalancerService("default", "checkout", framework.WithAnnotation(string(annotation.LoadBalancerBackend), awsBackend))
	if _, err := framework.CreateService(ctx, cp.Client, checkout); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 90*time.Second, "aws published down with an auth error", awsRefused(cp))

	out, errOut := runStatus(t, cp.AdminKubeconfig)
	if errOut != "" {
		t.Errorf("status wrote to stderr: %s", errOut)
	}
	if !strings.Contains(out, "AuthFailure") && !strings.Contains(out, "InvalidClientTokenId") {
		t.Errorf("aws's last error names neither AuthFailure nor InvalidClientTokenId:\n%s", out)
	}
	golden(t, filepath.Join("testdata", "status.golden"), normaliseStatus(out))
}

// awsRefused holds once the published status shows the aws backend down,
// its last error of class auth.
func awsRefused(cp *framework.ControlPlane) framework.Condition {
	return func(ctx context.Context) (bool, string, error) {
		cm, err := cp.Client.CoreV1().ConfigMaps(statuspublisher.DefaultNamespace).Get(ctx, statuspublisher.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		bs, err := statuspublisher.Decode(cm)
		if err != nil {
			return false, "", err
		}
		for _, b := range bs {
			if b.Name == awsBackend {
				e := b.Health.LastError
				return !b.Health.Up && e != nil && e.Class == "auth", cm.Data[awsBackend], nil
			}
		}
		return false, fmt.Sprintf("no %s in %v", awsBackend, cm.Data), nil
	}
}

func runStatus(t *testing.T, kubeconfig string) (stdout, stderr string) {
	t.Helper()
	b := framework.RequireBinaries(t, func(b framework.Binaries) []string { return []string{b.CCM} })
	cmd := exec.Command(b.CCM, "status", "--kubeconfig", kubeconfig) //nolint:gosec // the binary under test.
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("status: %v\n%s", err, errOut.String())
	}
	return out.String(), errOut.String()
}

// What varies from run to run in the status output: ages, the text of the
// last error (which call failed last, its request ID), the VMs' BIOS UUIDs,
// the IDs the AWS fake makes up and the hash of the Service's UID in an NLB's
// name.
var normalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(\d+[smhdy])+ ago`), "<age> ago"},
	{regexp.MustCompile(`ago, \w+ \((\w+)\): .*$`), "ago, <operation> ($1): <message>"},
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uuid>"},
	{regexp.MustCompile(`\bi-[0-9a-f]{8,17}\b`), "i-<id>"},
	{regexp.MustCompile(`(k8s-[a-z0-9]+-[a-z0-9]+)-[0-9a-f]{10}\b`), "$1-<hash>"},
	{regexp.MustCompile(`/net/([\w<>-]+)/[0-9a-f]+`), "/net/$1/<id>"},
	{regexp.MustCompile(`-[0-9a-f]{6,}\.elb\.`), "-<id>.elb."},
}

// normaliseStatus replaces what varies and aligns the columns again (the
// binary's tabwriter pads each column with at least 3 spaces).
func normaliseStatus(out string) []byte {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 3, ' ', 0)
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		cols := regexp.MustCompile(` {3,}`).Split(strings.TrimRight(line, " "), -1)
		for i := range cols {
			for _, n := range normalisers {
				cols[i] = n.re.ReplaceAllString(cols[i], n.with)
			}
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	_ = tw.Flush()
	return buf.Bytes()
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	testutil.Golden(t, path, got, *update)
}

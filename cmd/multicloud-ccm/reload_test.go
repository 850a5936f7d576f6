package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/testutil"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

const metalOnly = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer: {defaultBackend: metal}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: bm-1, addresses: [{type: InternalIP, address: 10.0.0.11}]}]
    addressPools: [{name: public, addresses: ["192.0.2.0/28"]}]
`

// withAWS is metalOnly with an aws backend whose credentials are in the
// files ak and sk beside the config.
func withAWS(url, vpc string) string {
	return metalOnly + fmt.Sprintf(`- name: aws
  type: aws
  aws:
    region: eu-west-1
    vpc: %s
    endpoints: {ec2: %q, elbv2: %q, sts: %q}
    credentials:
      accessKeyID: {file: ak}
      secretAccessKey: {file: sk}
`, vpc, url, url, url)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOneEditOneReload: an edit that adds a backend referencing files
// (credentials) is applied once: one CloudConfigReloaded event, reloads_total
// +1, the controller told once, however often the watcher polls after.
// The watcher used to hash the newly referenced files only after applying,
// saw them as a second change and applied the same config again.
func TestOneEditOneReload(t *testing.T) {
	fake := awsfake.New("eu-west-1")
	seeded := fake.Seed(awsfake.SeedSpec{ClusterID: "test", Instances: 1})
	running, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = running.Close() }()

	dir := t.TempDir()
	path := filepath.Join(dir, "cloud-config.yaml")
	write(t, path, metalOnly)
	cloud, err := newReloadingCloud(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := cloud.(reloadingCloud).w
	events := record.NewFakeRecorder(10)
	w.recorder = events
	told := 0
	w.onApplied(func(prev, next *config.CloudConfig, ch router.Changes) {
		told++
		if told == 1 && (len(prev.Backends) != 1 || len(next.Backends) != 2 || len(ch.Added) != 1) {
			t.Errorf("told prev %d backends, next %d, added %v", len(prev.Backends), len(next.Backends), ch.Added)
		}
	})
	success := configReloads.WithLabelValues("success")
	before, _ := testutil.GetCounterMetricValue(success)

	write(t, filepath.Join(dir, "ak"), "AKID")
	write(t, filepath.Join(dir, "sk"), "secret")
	write(t, path, withAWS(running.URL, seeded.VPCID))
	for range 3 {
		w.poll()
	}
	after, _ := testutil.GetCounterMetricValue(success)
	if after-before != 1 {
		t.Errorf("reloads_total{result=success} +%v for one edit, want +1", after-before)
	}
	if n := len(events.Events); n != 1 {
		t.Errorf("%d reload events for one edit, want 1", n)
	}
	if told != 1 {
		t.Errorf("the controller was told of %d reloads, want 1", told)
	}

	// The referenced file rotated alone: one more reload.
	write(t, filepath.Join(dir, "sk"), "rotated")
	for range 3 {
		w.poll()
	}
	if got, _ := testutil.GetCounterMetricValue(success); got-after != 1 {
		t.Errorf("reloads_total +%v for a rotated file, want +1", got-after)
	}
}

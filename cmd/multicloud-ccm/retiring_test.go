package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestConfigRetiringMetric: multicloud_ccm_config_retiring is served for
// the provider in use and reads 0 once a reload's replaced configuration
// has no call left in flight (pkg/router's TestRetiringCountsCallsInFlight
// counts one in flight).
func TestConfigRetiringMetric(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cloud-config.yaml")
	write(t, path, metalOnly)
	cloud, err := newReloadingCloud(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := cloud.(reloadingCloud).w
	write(t, path, metalOnly+"# edited\n")
	w.poll()
	if w.rl.Current() == nil {
		t.Fatal("no configuration in use")
	}
	// The replaced configuration ends in a goroutine of its own.
	utilt.Eventually(t, 5*time.Second, "multicloud_ccm_config_retiring 0", func() error {
		got, ok := gauge(t, "multicloud_ccm_config_retiring")
		if !ok {
			return errors.New("multicloud_ccm_config_retiring is not served")
		}
		if got != 0 {
			return fmt.Errorf("multicloud_ccm_config_retiring = %v after a reload with no call in flight, want 0", got)
		}
		return nil
	})
}

// gauge reads an unlabelled gauge from the legacy registry.
func gauge(t *testing.T, name string) (float64, bool) {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

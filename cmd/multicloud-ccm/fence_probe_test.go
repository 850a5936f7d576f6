package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/fence"
)

// TestProbeLeaderMigrationAndContentTypes: with --enable-leader-migration
// (default migration config: lease cloud-provider-extraction-migration),
// a non-default lease namespace/name, and either content type
// (--kube-api-content-type JSON or protobuf), the migration elector's own
// lease passes the fence before the main lease is held, a migrated
// controller's client (cloud-node-lifecycle-controller) is fenced on the
// main lease, and both open once the main elector, built as upstream's
// leaderElectAndRun builds it, created its lease. Passes: no defect found.
func TestProbeLeaderMigrationAndContentTypes(t *testing.T) {
	for _, contentType := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		t.Run(contentType, func(t *testing.T) {
			srv := &echoServer{}
			ts := httptest.NewServer(srv)
			t.Cleanup(ts.Close)
			opts, err := options.NewCloudControllerManagerOptions()
			if err != nil {
				t.Fatal(err)
			}
			setDefaults(opts)
			opts.Master = ts.URL
			opts.SecureServing.BindPort = 0
			if opts.WebhookServing != nil {
				opts.WebhookServing.BindPort = 0
			}
			opts.KubeCloudShared.CloudProvider.Name = "multicloud"
			opts.Generic.LeaderElection.LeaderElect = true
			opts.Generic.LeaderElection.ResourceName = "ccm-probe"
			opts.Generic.LeaderElection.ResourceNamespace = "ccm-system"
			opts.Generic.LeaderMigration.Enabled = true
			opts.Generic.ClientConnection.ContentType = contentType
			cfg, err := opts.Config(app.ControllerNames(controllerInitializers()), app.ControllersDisabledByDefault.List(),
				names.CCMControllerAliases(), app.AllWebhooks, app.DisabledByDefaultWebhooks)
			if err != nil {
				t.Fatal(err)
			}
			c := cfg.Complete()
			if err := installFence(c); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			le, lm := c.ComponentConfig.Generic.LeaderElection, c.ComponentConfig.Generic.LeaderMigration
			lock := func(name, id string) resourcelock.Interface {
				l, err := resourcelock.NewFromKubeconfig(le.ResourceLock, le.ResourceNamespace, name,
					resourcelock.ResourceLockConfig{Identity: id}, c.Kubeconfig, le.RenewDeadline.Duration)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			now := metav1.NewTime(time.Now())
			rec := resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a_1", LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}
			migrated := c.ClientBuilder.ClientOrDie("cloud-node-lifecycle-controller")
			write := func() error {
				_, err := migrated.CoreV1().Nodes().UpdateStatus(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.UpdateOptions{})
				return err
			}
			if err := write(); !errors.Is(err, fence.ErrFenced) {
				t.Errorf("a migrated controller's write before the main lease: %v, want fenced", err)
			}
			if err := lock(lm.LeaderName, "replica-a_1").Create(ctx, rec); err != nil {
				t.Errorf("the migration elector's create of %s: %v", lm.LeaderName, err)
			}
			if err := write(); !errors.Is(err, fence.ErrFenced) {
				t.Errorf("the migration lease opened the fence: %v", err)
			}
			if err := lock(le.ResourceName, "replica-a_1").Create(ctx, rec); err != nil {
				t.Fatalf("the main elector's create: %v", err)
			}
			if err := write(); err != nil {
				t.Errorf("a migrated controller's write after the main lease: %v", err)
			}
		})
	}
}

// TestProbeSubSecondLeaseDurationFlag is TestProbeLeaseDurationSecondsTruncated
// (pkg/fence) through the command's own options and upstream's lock:
// --leader-elect-lease-duration=1500ms (with --leader-elect-renew-deadline=1s,
// --leader-elect-retry-period=200ms, which upstream accepts) makes the
// elector write leaseDurationSeconds=1 (int(LeaseDuration/time.Second), as
// tryAcquireOrRenew does), so a standby may lead 1 s after it saw the
// renewal; the fence still passes a write 1.2 s after the renewal was sent.
//
// Expected to FAIL until the fence's bound follows the lease's
// leaseDurationSeconds (or the flag truncated to whole seconds).
func TestProbeSubSecondLeaseDurationFlag(t *testing.T) {
	srv := &echoServer{}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	setDefaults(opts)
	fs := opts.Flags(app.ControllerNames(controllerInitializers()), app.ControllersDisabledByDefault.List(),
		names.CCMControllerAliases(), app.AllWebhooks, app.DisabledByDefaultWebhooks)
	for _, set := range []struct{ flag, value string }{
		{"leader-elect", "true"}, {"leader-elect-lease-duration", "1500ms"},
		{"leader-elect-renew-deadline", "1s"}, {"leader-elect-retry-period", "200ms"},
		{"leader-elect-resource-name", "mccm"}, {"master", ts.URL}, {"cloud-provider", "multicloud"},
		{"secure-port", "0"},
	} {
		found := false
		for _, name := range fs.Order {
			if fs.FlagSets[name].Lookup(set.flag) != nil {
				if err := fs.FlagSets[name].Set(set.flag, set.value); err != nil {
					t.Fatalf("--%s=%s: %v", set.flag, set.value, err)
				}
				found = true
			}
		}
		if !found {
			t.Fatalf("no flag --%s", set.flag)
		}
	}
	cfg, err := opts.Config(app.ControllerNames(controllerInitializers()), app.ControllersDisabledByDefault.List(),
		names.CCMControllerAliases(), app.AllWebhooks, app.DisabledByDefaultWebhooks)
	if err != nil {
		t.Fatalf("upstream refuses the flags: %v", err)
	}
	c := cfg.Complete()
	if err := installFence(c); err != nil {
		t.Fatal(err)
	}
	le := c.ComponentConfig.Generic.LeaderElection
	lock, err := resourcelock.NewFromKubeconfig(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
		resourcelock.ResourceLockConfig{Identity: "replica-a_1"}, c.Kubeconfig, le.RenewDeadline.Duration)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := metav1.NewTime(time.Now())
	secs := int(le.LeaseDuration.Duration / time.Second) // as upstream's tryAcquireOrRenew
	sent := time.Now()
	if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a_1", LeaseDurationSeconds: secs, AcquireTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	standbyMayLead := sent.Add(time.Duration(secs) * time.Second)
	time.Sleep(time.Until(standbyMayLead.Add(200 * time.Millisecond)))
	client := c.ClientBuilder.ClientOrDie("multicloud-load-balancer")
	_, err = client.CoreV1().Services("default").UpdateStatus(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}, metav1.UpdateOptions{})
	if !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("a write %s after the renewal passed (err %v), though the lease says leaseDurationSeconds=%d",
			time.Since(sent).Round(time.Millisecond), err, secs)
	}
}

package main

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// TestProbeTakeoverClockWired: installFence makes the fence's TookOver the
// process's takeover clock: after the elector's client (built from the
// kubeconfig, as upstream's Run builds it) creates the Lease, nothing may
// land from a previous leader; after it updates the Lease another holder
// had, something may, for the window. Without leader election, or with
// --leader-elect-fence=false, there is no takeover clock.
func TestProbeTakeoverClockWired(t *testing.T) {
	for _, tc := range []struct {
		name        string
		leaderElect bool
		fenceFlag   bool
		clock       bool
	}{
		{"leader election", true, true, true},
		{"no leader election", false, true, false},
		{"fence turned off", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(&echoServer{})
			t.Cleanup(ts.Close)
			c := completedConfig(t, ts.URL, tc.leaderElect)
			fenceWrites = tc.fenceFlag
			t.Cleanup(func() { fenceWrites = true })
			t.Cleanup(func() { cloudapi.SetMutationGate(nil); cloudapi.SetTakeover(nil) })
			cloudapi.SetTakeover(nil)
			if err := installFence(c); err != nil {
				t.Fatal(err)
			}
			le := c.ComponentConfig.Generic.LeaderElection
			ctx := context.Background()
			now := metav1.NewTime(time.Now())
			// The previous leader's record, then ours over it, through the
			// elector's lock on the fenced kubeconfig.
			prev, err := resourcelock.NewFromKubeconfig(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
				resourcelock.ResourceLockConfig{Identity: "replica-b_1"}, c.Kubeconfig, le.RenewDeadline.Duration)
			if err != nil {
				t.Fatal(err)
			}
			if err := prev.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "replica-b_1", LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}); err != nil {
				t.Fatal(err)
			}
			if got := cloudapi.LandingAfterTakeover(30 * time.Second); !got.IsZero() {
				t.Errorf("after the Lease's create: a previous leader's change may land until %v, want never", got)
			}
			if err := prev.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a_1", LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now, LeaderTransitions: 1}); err != nil {
				t.Fatal(err)
			}
			got := cloudapi.LandingAfterTakeover(30 * time.Second)
			if tc.clock != !got.IsZero() {
				t.Errorf("after updating the Lease another holder had: a previous leader's change may land until %v, want a takeover clock %v", got, tc.clock)
			}
		})
	}
}

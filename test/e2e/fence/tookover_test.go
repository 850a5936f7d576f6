package fence

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/fence"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// elector is one replica: upstream's LeaderElector on a LeaseLock, its
// client behind its own fence, as cmd/multicloud-ccm wires it.
type elector struct {
	f       *fence.Fence
	cancel  context.CancelFunc
	started chan struct{}
	done    chan struct{}
}

func startElector(t *testing.T, cp *framework.ControlPlane, contentType, lease, id string, release bool) *elector {
	t.Helper()
	f, err := fence.New(fence.Options{Namespace: "kube-system", Name: lease, LeaseDuration: leaseDuration})
	if err != nil {
		t.Fatal(err)
	}
	cfg := cp.RESTConfig(cp.AdminToken)
	cfg.ContentType = contentType
	cfg.Wrap(f.Wrap)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &elector{f: f, started: make(chan struct{}), done: make(chan struct{})}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: lease},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: release,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(e.started) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() {
		defer close(e.done)
		le.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-e.done })
	return e
}

func (e *elector) waitLeading(t *testing.T, who string) time.Time {
	t.Helper()
	select {
	case <-e.started:
		return time.Now()
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not become the leader in 30 s", who)
	}
	return time.Time{}
}

func (e *elector) stop() {
	e.cancel()
	<-e.done
}

// TestTookOverRealElector drives upstream's LeaderElector (LeaseLock)
// through the fence against a real kube-apiserver, in JSON and in
// protobuf (the CCM's default --kube-api-content-type): the replica that
// creates the Lease took nothing over; the one that acquires it after the
// previous holder stopped (its Lease expired) took over, at a time
// between its start and its OnStartedLeading, kept across its renewals;
// and so does the one that acquires a Lease released on a graceful
// shutdown (ReleaseOnCancel: holder "").
func TestTookOverRealElector(t *testing.T) {
	cp := framework.StartControlPlaneT(t)
	for _, ct := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		t.Run(ct, func(t *testing.T) {
			lease := "tookover-" + map[string]string{"application/json": "json", "application/vnd.kubernetes.protobuf": "pb"}[ct]
			a := startElector(t, cp, ct, lease, "a", false)
			a.waitLeading(t, "a")
			time.Sleep(2 * retryPeriod) // a few renewals
			if got := a.f.TookOver(); !got.IsZero() {
				t.Errorf("a created the Lease, TookOver = %v, want zero", got)
			}
			if !a.f.Holds() {
				t.Errorf("a leads but its fence does not hold")
			}

			// a stops without releasing: b takes the expired Lease over.
			a.stop()
			bStart := time.Now()
			b := startElector(t, cp, ct, lease, "b", true)
			bLed := b.waitLeading(t, "b")
			took := b.f.TookOver()
			if took.IsZero() || took.Before(bStart) || took.After(bLed) {
				t.Errorf("b took the expired Lease of a over: TookOver = %v, want between its start %v and its leading %v", took, bStart, bLed)
			}
			time.Sleep(3 * retryPeriod)
			if got := b.f.TookOver(); !got.Equal(took) {
				t.Errorf("b's TookOver moved across its renewals: %v, then %v", took, got)
			}

			// b stops and releases the Lease (holder ""): c takes it over.
			b.stop()
			cStart := time.Now()
			c := startElector(t, cp, ct, lease, "c", false)
			cLed := c.waitLeading(t, "c")
			took = c.f.TookOver()
			if took.IsZero() || took.Before(cStart) || took.After(cLed) {
				t.Errorf("c took the released Lease over: TookOver = %v, want between its start %v and its leading %v", took, cStart, cLed)
			}
			if !c.f.Holds() {
				t.Errorf("c leads but its fence does not hold")
			}
			c.stop()
		})
	}
}

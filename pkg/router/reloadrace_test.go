package router

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestReloadRaceInvariants runs EnsureLoadBalancer, UpdateLoadBalancer and
// EnsureLoadBalancerDeleted from several goroutines while another applies
// configurations in a loop (the default backend flips between a and b, a
// backend c comes and goes), under -race in CI. At the end, once the last
// configuration is in use and each live Service was ensured once more:
// every live Service has exactly one load balancer, in the backend its
// rules name, and the deleted ones have none anywhere.
func TestReloadRaceInvariants(t *testing.T) {
	ctx := context.Background()
	name := func(n string) heldBackend {
		return heldBackend{n, t.Name() + "/" + n, map[string]string{"a": "198.51.100.1", "b": "198.51.100.2", "c": "198.51.100.3"}[n]}
	}
	clouds := map[string]*heldState{}
	for _, n := range []string{"a", "b", "c"} {
		clouds[n] = heldCloudState(t.Name()+"/"+n, name(n).ip)
		clouds[n].latency.Store(200)
	}
	configs := [][]any{{"defaultBackend: a", "a", "b"}, {"defaultBackend: b", "a", "b", "c"}, {"defaultBackend: a", "a", "b", "c"}, {"defaultBackend: b", "a", "b"}}
	build := func(c []any) []heldBackend {
		var bs []heldBackend
		for _, n := range c[1:] {
			bs = append(bs, name(n.(string)))
		}
		return bs
	}
	var svcs []*corev1.Service
	wantIn := map[string]string{}
	for i := range 6 {
		var tweaks []testutil.ServiceTweak
		switch i % 3 {
		case 0:
			tweaks, wantIn[fmt.Sprint("s", i)] = append(tweaks, withLBBackend("a")), "a"
		case 1:
			tweaks, wantIn[fmt.Sprint("s", i)] = append(tweaks, withLBBackend("b")), "b"
		default:
			wantIn[fmt.Sprint("s", i)] = "a" // the last configuration's default
		}
		svcs = append(svcs, newService(fmt.Sprint("s", i), tweaks...))
	}
	objs := make([]runtimeObject, 0, len(svcs))
	for _, s := range svcs {
		objs = append(objs, s)
	}
	c := startReloadCluster(t, heldConfig(t, configs[0][0].(string), build(configs[0])...), objs...)
	c.run(t, func(context.Context) {})
	get := func(n string) (*corev1.Service, bool) {
		s, err := c.client.CoreV1().Services("default").Get(ctx, n, metav1.GetOptions{})
		return s, err == nil
	}

	var wg sync.WaitGroup
	stopReloads := make(chan struct{})
	reloads := 0
	wg.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-stopReloads:
				reloads = i - 1
				return
			default:
			}
			conf := configs[i%len(configs)]
			if _, err := c.rl.Apply(ctx, heldConfig(t, conf[0].(string), build(conf)...)); err != nil {
				t.Errorf("Apply: %v", err)
				return
			}
		}
	})
	var workers sync.WaitGroup
	for _, s := range svcs {
		for range 2 {
			workers.Go(func() {
				for range 30 {
					cur, ok := get(s.Name)
					if !ok {
						return
					}
					_, _ = c.rl.EnsureLoadBalancer(ctx, cluster, cur, nil)
					_ = c.rl.UpdateLoadBalancer(ctx, cluster, cur, nil)
				}
			})
		}
	}
	deleted := map[types.UID]bool{}
	for i, s := range svcs {
		if i%2 == 0 {
			continue
		}
		deleted[s.UID] = true
		delete(wantIn, s.Name)
		workers.Go(func() {
			// Delete once the Service has a load balancer somewhere, while
			// the workers and reloads go on.
			eventually(t, s.Name+" ensured", func() bool {
				return clouds["a"].has(s) || clouds["b"].has(s)
			})
			cur, ok := get(s.Name)
			if !ok {
				t.Errorf("%s gone before its delete", s.Name)
				return
			}
			now := metav1.Now()
			cur.DeletionTimestamp = &now
			if err := c.client.CoreV1().Services("default").Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
				return
			}
			for c.rl.EnsureLoadBalancerDeleted(ctx, cluster, cur) != nil {
			}
		})
	}
	workers.Wait()
	close(stopReloads)
	wg.Wait()
	t.Logf("%d reloads during the calls", reloads)

	last := configs[0]
	c.apply(t, heldConfig(t, last[0].(string), build(last)...))
	for n := range wantIn {
		cur, _ := get(n)
		if _, err := c.rl.EnsureLoadBalancer(ctx, cluster, cur, nil); err != nil {
			t.Errorf("final Ensure of %s: %v", n, err)
		}
	}
	for n, want := range wantIn {
		cur, _ := get(n)
		for cn, cloud := range clouds {
			if got := cloud.has(cur); got != (cn == want) {
				t.Errorf("%s: load balancer in %s = %v, want it only in %s", n, cn, got, want)
			}
		}
	}
	for cn, cloud := range clouds {
		for _, uid := range cloud.heldUIDs() {
			if deleted[uid] {
				t.Errorf("cloud %s still holds a load balancer of a deleted Service (%s)", cn, uid)
			}
		}
	}
}

// TestStaleCopyNamingADroppedBackendIsRecordedAgain is the race
// TestReloadRaceInvariants found once in CI, made deterministic: a caller
// holds a copy of the Service from when its record named backend a; the
// load balancer has since moved to b (a deleted, dropped from the record);
// a reload makes a the default again, and the old copy is ensured. The
// copy's annotation still names a, but a must be recorded again before
// anything is created there, or the Service's delete does not look in a
// and its load balancer leaks.
func TestStaleCopyNamingADroppedBackendIsRecordedAgain(t *testing.T) {
	ctx := context.Background()
	a, b := heldBackend{"a", t.Name() + "/a", "198.51.100.1"}, heldBackend{"b", t.Name() + "/b", "198.51.100.2"}
	ca, cb := heldCloudState(a.cloud, a.ip), heldCloudState(b.cloud, b.ip)
	c := startReloadCluster(t, heldConfig(t, "defaultBackend: a", a, b), newService("web"))
	c.run(t, func(context.Context) {})
	if _, err := c.rl.EnsureLoadBalancer(ctx, cluster, c.service(t, "web"), nil); err != nil {
		t.Fatal(err)
	}
	stale := c.service(t, "web")
	if got := c.record(t, "web"); got != "a" || !ca.has(stale) {
		t.Fatalf("record %q, in a %v; want a", got, ca.has(stale))
	}

	c.apply(t, heldConfig(t, "defaultBackend: b", a, b))
	if _, err := c.rl.EnsureLoadBalancer(ctx, cluster, c.service(t, "web"), nil); err != nil {
		t.Fatal(err)
	}
	if got := c.record(t, "web"); got != "b" || ca.has(stale) || !cb.has(stale) {
		t.Fatalf("after the move to b: record %q, in a %v, in b %v", got, ca.has(stale), cb.has(stale))
	}

	c.apply(t, heldConfig(t, "defaultBackend: a", a, b))
	if _, err := c.rl.EnsureLoadBalancer(ctx, cluster, stale, nil); err != nil {
		t.Fatal(err)
	}
	if got := c.record(t, "web"); got != "a" || !ca.has(stale) {
		t.Fatalf("after ensuring the old copy: record %q, in a %v; want a, held in a", got, ca.has(stale))
	}
	gone := c.service(t, "web")
	now := metav1.Now()
	gone.DeletionTimestamp = &now
	if err := c.rl.EnsureLoadBalancerDeleted(ctx, cluster, gone); err != nil {
		t.Fatal(err)
	}
	if ca.has(stale) || cb.has(stale) {
		t.Errorf("after the delete: in a %v, in b %v; want nothing anywhere", ca.has(stale), cb.has(stale))
	}
}

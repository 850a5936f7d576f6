package aws

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// addNodes adds instances from to to-1 to the fake and their Nodes (with
// the providerIDs EKS's kubelet writes) to idx, and returns the Nodes.
func (e *env) addNodes(t *testing.T, idx toolscache.Indexer, from, to int, tweaks ...func(*awsfake.Instance)) []*corev1.Node {
	t.Helper()
	var ns []*corev1.Node
	for i := from; i < to; i++ {
		in := e.addInstance(i, tweaks...)
		n := newNode(fmt.Sprint("n", i), testutil.WithProviderID(providerID(in.Zone, in.ID)))
		if err := idx.Add(n); err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
	}
	return ns
}

// concurrently calls f for every node from workers goroutines, as the
// cloud-node controller's workers and the lifecycle controller do.
func concurrently(nodes []*corev1.Node, workers int, f func(*corev1.Node)) {
	next := make(chan *corev1.Node)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for n := range next {
				f(n)
			}
		})
	}
	for _, n := range nodes {
		next <- n
	}
	close(next)
	wg.Wait()
}

// TestMissesCoalesced: 200 nodes registered after the instance listing
// was taken (so each is a miss), initialised from 20 goroutines at once,
// cost a handful of DescribeInstances, not one each (200 before the
// misses were coalesced). With the Node lister (as in the CCM), the first
// miss names every node the listing lacks: 1 call. Without it, the misses
// of each moment go together, 20 at a time.
func TestMissesCoalesced(t *testing.T) {
	for _, tc := range []struct {
		lister bool
		most   int
	}{{true, 2}, {false, 40}} {
		t.Run(fmt.Sprintf("lister=%v", tc.lister), func(t *testing.T) {
			e := newEnv(t)
			idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
			old := e.addNodes(t, idx, 0, 5)
			if tc.lister {
				e.cloud.instances.setNodeLister(corelisters.NewNodeLister(idx))
			}
			ctx := context.Background()
			if _, err := e.cloud.instances.InstanceMetadata(ctx, old[0]); err != nil {
				t.Fatal(err)
			}
			fresh := e.addNodes(t, idx, 5, 205)
			e.fake.ResetCalls()
			var mu sync.Mutex
			var failed []string
			concurrently(fresh, 20, func(n *corev1.Node) {
				md, err := e.cloud.instances.InstanceMetadata(ctx, n)
				if err != nil || md.ProviderID != n.Spec.ProviderID {
					mu.Lock()
					defer mu.Unlock()
					failed = append(failed, fmt.Sprintf("%s: %+v, %v", n.Name, md, err))
				}
			})
			if len(failed) > 0 {
				t.Fatalf("InstanceMetadata failed for %d nodes: %v", len(failed), failed)
			}
			calls := e.fake.Calls("DescribeInstances")
			t.Logf("200 new nodes from 20 goroutines: %d DescribeInstances", calls)
			if calls > tc.most {
				t.Errorf("200 new nodes cost %d DescribeInstances, want at most %d", calls, tc.most)
			}
			e.fake.ResetCalls()
			concurrently(fresh, 20, func(n *corev1.Node) {
				if _, err := e.cloud.instances.InstanceMetadata(ctx, n); err != nil {
					t.Error(err)
				}
			})
			if calls := e.fake.Calls("DescribeInstances"); calls != 0 {
				t.Errorf("once found, the nodes cost %d more DescribeInstances, want 0 (served by the listing)", calls)
			}
		})
	}
}

// TestCoalescingNeverCallsAnInstanceGone: misses of running instances
// coalesced with misses of instances AWS does not know (whose IDs fail the
// whole batch) and of terminated ones, under a throttling storm, from 20
// goroutines: every running instance exists, every unknown or terminated
// one is gone (a single-ID DescribeInstances said so), and during an EC2
// outage every answer is an error, never "gone".
func TestCoalescingNeverCallsAnInstanceGone(t *testing.T) {
	e := newEnv(t)
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	old := e.addNodes(t, idx, 0, 5)
	e.cloud.instances.setNodeLister(corelisters.NewNodeLister(idx))
	ctx := context.Background()
	if _, err := e.cloud.instances.InstanceExists(ctx, old[0]); err != nil {
		t.Fatal(err)
	}
	running := e.addNodes(t, idx, 5, 155)
	terminated := e.addNodes(t, idx, 155, 165, func(in *awsfake.Instance) { in.State = "terminated" })
	var unknown []*corev1.Node
	for i := 165; i < 185; i++ {
		n := newNode(fmt.Sprint("n", i), testutil.WithProviderID(providerID(testRegion+"a", instanceID(i))))
		if err := idx.Add(n); err != nil {
			t.Fatal(err)
		}
		unknown = append(unknown, n)
	}
	want := map[string]bool{}
	var all []*corev1.Node
	for i := range running {
		// Interleaved, so batches mix the three kinds.
		all = append(all, running[i])
		want[running[i].Name] = true
		if i < len(unknown) {
			all = append(all, unknown[i], terminated[i%len(terminated)])
		}
	}
	e.fake.ResetCalls()
	e.fake.Throttle(4)
	var mu sync.Mutex
	var wrong []string
	concurrently(all, 20, func(n *corev1.Node) {
		exists, err := e.cloud.instances.InstanceExists(ctx, n)
		if err != nil || exists != want[n.Name] {
			mu.Lock()
			defer mu.Unlock()
			wrong = append(wrong, fmt.Sprintf("%s = %v, %v; want %v", n.Name, exists, err, want[n.Name]))
		}
	})
	if len(wrong) > 0 {
		t.Errorf("InstanceExists wrong for %d nodes: %v", len(wrong), wrong)
	}
	t.Logf("150 running, 20 unknown and 10 terminated instances: %d DescribeInstances", e.fake.Calls("DescribeInstances"))

	fresh := e.addNodes(t, idx, 200, 260)
	e.fake.SetOutage(true)
	concurrently(append(fresh, unknown...), 20, func(n *corev1.Node) {
		exists, err := e.cloud.instances.InstanceExists(ctx, n)
		if err == nil && !exists && want[n.Name] {
			mu.Lock()
			defer mu.Unlock()
			wrong = append(wrong, n.Name)
		}
		if err == nil && n.Name >= "n200" {
			t.Errorf("%s during the outage: %v, nil; want an error", n.Name, exists)
		}
	})
	if len(wrong) > 0 {
		t.Errorf("during the outage %d instances were called gone: %v", len(wrong), wrong)
	}
}

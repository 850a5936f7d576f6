package aws

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// Review probes (session 56) of 30db798 (providerIDs parsed by hand: its
// probes moved to awsid with the parser) and e560ada (CanTarget's
// target-node-labels from a one-entry cache). Both pass: they pin down
// what the changes must keep.

// TestProbeCanTargetLabelsConcurrently (passes; run it under -race): the
// router asks CanTarget from several goroutines at once (the service
// controller's workers, the node syncs), for Services whose
// target-node-labels texts differ; the one-entry cache
// (lastParsedNodeLabels) must never answer one Service with another's
// labels. Each goroutine checks a node carrying its labels only.
func TestProbeCanTargetLabelsConcurrently(t *testing.T) {
	lb := &LoadBalancer{}
	const workers = 8
	svcs := make([]*corev1.Service, workers)
	nodes := make([]*corev1.Node, workers)
	for i := range workers {
		// Texts that differ in their last byte only, and one that is a
		// prefix of another.
		text := fmt.Sprintf("pool=edge,tier=t%d", i)
		if i == workers-1 {
			text = "pool=edge"
		}
		svcs[i] = newService(fmt.Sprintf("s%d", i), withAnnotation(AnnotationTargetNodeLabels, text))
		n := newNode(fmt.Sprintf("n%d", i), testutil.WithProviderID(fmt.Sprintf("aws:///eu-west-1a/i-%08x", i)), testutil.WithInternalIP("10.0.1.9"))
		n.Labels = map[string]string{"pool": "edge", "tier": fmt.Sprintf("t%d", i)}
		if i == workers-1 {
			n.Labels = map[string]string{"pool": "edge"}
		}
		nodes[i] = n
	}
	// want[i][j]: Service i targets node j.
	want := func(i, j int) bool {
		if i == workers-1 {
			return true // pool=edge: every node
		}
		return i == j
	}
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 20_000 {
				i := w
				if rng.IntN(4) == 0 {
					i = rng.IntN(workers) // now and then, another Service
				}
				j := rng.IntN(workers)
				if got := lb.CanTarget(svcs[i], nodes[j]); got != want(i, j) {
					errs <- fmt.Sprintf("CanTarget(%s %q, %s %v) = %v, want %v", svcs[i].Name, svcs[i].Annotations[string(AnnotationTargetNodeLabels)], nodes[j].Name, nodes[j].Labels, got, want(i, j))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

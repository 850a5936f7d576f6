package baremetal

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
)

// setClient gives the load balancer the client it reads namespaces'
// labels with, for pools with namespace selectors.
func (lb *LoadBalancer) setClient(c clientset.Interface) {
	lb.srcMu.Lock()
	defer lb.srcMu.Unlock()
	lb.client = c
}

// namespaceLabels returns the labels of the namespace when a pool has
// namespace selectors (nil otherwise, or without a client). The namespace
// is read when a Service is ensured, so a selector added by a reload, or a
// namespace relabelled, counts from the Service's next change.
func (lb *LoadBalancer) namespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	lb.mu.Lock()
	needed := false
	for _, ps := range lb.alloc.pools {
		needed = needed || len(ps.NamespaceSelectors) > 0
	}
	lb.mu.Unlock()
	lb.srcMu.Lock()
	c := lb.client
	lb.srcMu.Unlock()
	if !needed || c == nil {
		return nil, nil
	}
	ns, err := c.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the labels of namespace %s for the pools' namespaceSelectors: %w", namespace, err)
	}
	if ns.Labels == nil {
		return map[string]string{}, nil
	}
	return ns.Labels, nil
}

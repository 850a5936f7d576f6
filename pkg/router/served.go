package router

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

var (
	servedNodesDesc = metrics.NewDesc("multicloud_ccm_backend_nodes",
		"Nodes a backend serves: Nodes labelled multicloud-ccm.io/backend with its name.",
		[]string{"backend"}, nil, metrics.ALPHA, "")
	servedLBsDesc = metrics.NewDesc("multicloud_ccm_backend_load_balancers",
		"LoadBalancer Services a backend serves: Services annotated multicloud-ccm.io/load-balancer-served-by with its name.",
		[]string{"backend"}, nil, metrics.ALPHA, "")

	// served counts, at each scrape, from the informers' caches of the
	// router in use (the latest to get its informers).
	served = &servedCollector{}
	// servedOnce registers served, at the first countServed.
	servedOnce sync.Once
)

// servedSource is what servedCollector counts from.
type servedSource struct {
	// withNodes and withLBs are the backends with instances and with load
	// balancers.
	withNodes, withLBs []string
	nodes              corelisters.NodeLister
	services           corelisters.ServiceLister
}

// servedCollector reports per backend how many Nodes and load balancers it
// serves, read from the labels and annotations the router writes. Counting
// at scrape time from the informer caches costs no API request and can
// never drift from the objects.
type servedCollector struct {
	metrics.BaseStableCollector
	src atomic.Pointer[servedSource]
}

// DescribeWithStability describes the two gauges.
func (c *servedCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- servedNodesDesc
	ch <- servedLBsDesc
}

// CollectWithStability counts, reporting 0 for a backend that serves none
// (a backend without instances or load balancers has no such gauge).
func (c *servedCollector) CollectWithStability(ch chan<- metrics.Metric) {
	src := c.src.Load()
	if src == nil {
		return
	}
	nodes, lbs := src.count()
	for _, b := range src.withNodes {
		ch <- metrics.NewLazyConstMetric(servedNodesDesc, metrics.GaugeValue, float64(nodes[b]), b)
	}
	for _, b := range src.withLBs {
		ch <- metrics.NewLazyConstMetric(servedLBsDesc, metrics.GaugeValue, float64(lbs[b]), b)
	}
}

// count counts the Nodes and the load balancers each backend serves.
func (src *servedSource) count() (nodes, lbs map[string]int) {
	nodes, lbs = map[string]int{}, map[string]int{}
	if all, err := src.nodes.List(labels.Everything()); err == nil {
		for _, n := range all {
			nodes[n.Labels[string(annotation.NodeBackend)]]++
		}
	}
	if src.services != nil {
		if all, err := src.services.List(labels.Everything()); err == nil {
			for _, s := range all {
				for _, b := range svcstate.SplitNames(s.Annotations[string(annotation.LoadBalancerServedBy)]) {
					lbs[b]++
				}
			}
		}
	}
	return nodes, lbs
}

// countServed makes the served metrics count r's backends from these
// listers (services nil: no load balancers).
func (r *Router) countServed(nodes corelisters.NodeLister, services corelisters.ServiceLister) {
	backend.RegisterMetrics()
	servedOnce.Do(func() { legacyregistry.CustomMustRegister(served) })
	src := &servedSource{nodes: nodes, services: services, withNodes: backend.Names(r.InstanceBackends), withLBs: backend.Names(r.lbs)}
	served.src.Store(src)
	r.served.Store(src)
}

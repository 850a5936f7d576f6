package lbcontroller

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// Reloaded re-syncs, in full, the Services a reload of the cloud-config
// (prev replaced by next; ch is what router.Reloadable.Apply changed)
// concerns among those the controller serves now:
//   - a class next serves and prev did not: its Services, Pending until now,
//     get their load balancers at once;
//   - a class whose backend or default annotations changed, or whose
//     backend was added, rebuilt or reconfigured;
//   - in classless mode, a Service without a class whose backend (its
//     annotation, else the default) changed the same way.
//
// A class that left the config concerns nobody: its Services keep their
// load balancers, untouched, and are still cleaned up when deleted (see
// sync). The Services the router names in ch.Rerouted are re-synced too
// when the controller serves them. A full sync of a Service whose load
// balancer is already right makes no mutating cloud call.
//
// A reload that may change which nodes a backend targets (configDiff's
// nodeTargets: loadBalancer.targetOtherCCMsNodes, the nodes section, a
// backend added, removed, rebuilt or reconfigured) is a node change too
// (nodesChanged): the batch's flush compares every served Service's
// targets, on the configuration now in use, with those its load
// balancers were given, and updates those that differ, once each; a
// call in flight meanwhile re-queues its Service (requeueIfNodesChanged).
// Before, no load balancer was re-targeted until some node changed
// (TestReloadChangingOwnNodesRetargets: gce-1, another CCM's node, never
// joined after targetOtherCCMsNodes was turned on). A reload that changes
// none of those is no node change: no pass over the Services, no cloud
// call (TestReloadKeepingTargetsUpdatesNothing).
func (c *Controller) Reloaded(prev, next *config.CloudConfig, ch router.Changes) {
	if prev == nil || next == nil {
		return
	}
	d := diffConfigs(prev, next, ch)
	if d.nodeTargets {
		c.nodesChanged()
	}
	all, err := c.services.List(labels.Everything())
	if err != nil {
		return
	}
	rerouted := sets.New[string]()
	for _, n := range ch.Rerouted {
		rerouted.Insert(n.String())
	}
	var keys []string
	for _, svc := range all {
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && c.serves(svc) && (d.concerns(svc) || rerouted.Has(keyOf(svc))) {
			keys = append(keys, keyOf(svc))
		}
	}
	c.mu.Lock()
	for _, k := range keys {
		c.full[k] = true // a full sync, even if the Service did not change
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.queue.Add(k)
	}
	klog.V(2).InfoS("Re-syncing the Services the cloud-config reload concerns", "controller", Name, "services", len(keys), "classes", sets.List(d.classes))
}

// configDiff is what a reload changed for the Services' routing.
type configDiff struct {
	// classes are the classes whose Services must be re-synced.
	classes sets.Set[string]
	// backends are the backends added, rebuilt or reconfigured.
	backends sets.Set[string]
	// defaultChanged: loadBalancer.defaultBackend names another backend.
	defaultChanged bool
	defaultBackend string
	// nodeTargets: the reload may change which nodes a backend targets
	// (router.Changes.NodeTargetsChanged).
	nodeTargets bool
}

func diffConfigs(prev, next *config.CloudConfig, ch router.Changes) configDiff {
	d := configDiff{
		classes:        sets.New[string](),
		backends:       sets.New(ch.Added...).Insert(ch.Rebuilt...).Insert(ch.Reconfigured...),
		defaultChanged: prev.LoadBalancer.DefaultBackend != next.LoadBalancer.DefaultBackend,
		defaultBackend: next.LoadBalancer.DefaultBackend,
		nodeTargets:    ch.NodeTargetsChanged(prev, next),
	}
	for _, nc := range next.LoadBalancer.Classes {
		pc, ok := prev.LoadBalancer.Class(nc.Name)
		if !ok || !slices.Equal(pc.Targets(), nc.Targets()) || !maps.Equal(pc.Annotations, nc.Annotations) || d.backends.HasAny(nc.Targets()...) {
			d.classes.Insert(nc.Name)
		}
	}
	return d
}

// concerns reports whether the reload changed the Service's routing.
func (d configDiff) concerns(svc *corev1.Service) bool {
	if svc.Spec.LoadBalancerClass != nil {
		return d.classes.Has(*svc.Spec.LoadBalancerClass)
	}
	if v, ok := svc.Annotations[string(annotation.LoadBalancerBackend)]; ok {
		return d.backends.HasAny(backendList(v)...)
	}
	return d.defaultChanged || d.backends.Has(d.defaultBackend)
}

// backendList reads the backend annotation's comma-separated list, as the
// router does: names trimmed, empty ones dropped.
func backendList(v string) []string {
	var out []string
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// takeFull reports whether a reload asked for a full sync of the Service
// since its last sync began, and takes the mark.
func (c *Controller) takeFull(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	full := c.full[key]
	delete(c.full, key)
	return full
}

// ServiceSyncer is a cloud whose timers hand a Service's due work to the
// controller serving it instead of writing the Service themselves (the
// router's drain timer, router.Router.SetServiceSync).
type ServiceSyncer interface {
	SetServiceSync(sync func(*corev1.Service) bool)
}

// ServedReporter is a cloud told which Services the controller serves
// (router.Router.SetServed): after a reload that changes which nodes the
// load balancers target, the router re-targets the others (upstream's
// service controller's) and leaves these to the controller's node sync
// (Reloaded).
type ServedReporter interface {
	SetServed(served func(*corev1.Service) bool)
}

// servesLB reports whether svc is a LoadBalancer Service the controller
// serves; it changes nothing.
func (c *Controller) servesLB(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && c.serves(svc)
}

// syncFull queues a Service the controller serves for a full sync (a
// drain's end: its EnsureLoadBalancer retires the drained load balancer),
// and reports whether it did.
func (c *Controller) syncFull(svc *corev1.Service) bool {
	if !c.servesLB(svc) {
		return false
	}
	key := keyOf(svc)
	c.mu.Lock()
	c.full[key] = true
	c.mu.Unlock()
	c.queue.Add(key)
	return true
}

// Package lbcontroller is multicloud-ccm's own load-balancer controller. It
// serves the LoadBalancer Services whose spec.loadBalancerClass is one of
// the classes in the cloud-config's loadBalancer.classes (upstream's
// service controller skips every Service with a class) and, unless
// upstream's service controller is turned back on (--controllers=*,service;
// it is disabled by default), those without a class too. It keeps the
// semantics users know from upstream (a cleanup finalizer: upstream's
// service.kubernetes.io/load-balancer-cleanup on classless Services, our
// Finalizer on classed ones; status written with a patch,
// node changes re-targeting, the upstream event reasons, retries with
// backoff, --concurrent-service-syncs) while writing as little as the API
// allows: a new Service costs two writes (finalizer with the router's
// record, then status with the served annotations) and one event.
//
// Every --load-balancer-resync-period it re-ensures each Service it serves
// (drift repair): backends make no mutating call when nothing changed, and
// what they had to repair is reported as a LoadBalancerDriftRepaired event
// and counted in multicloud_ccm_load_balancer_drift_repairs_total. At
// start (a restart, a new leader) the Services served before are
// re-checked the same way, under one pass: nothing unchanged is written,
// recorded as an event or logged at Info, and each pass ends with one
// summary line. Node changes are batched (nodesChanged): each Service's
// load balancer is updated at most once per batch, and only when the nodes
// it targets changed.
package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/internal/batch"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Name is the controller's name for --controllers (enable or disable it
// with --controllers=*,-multicloud-load-balancer) and its clients' name.
const Name = "multicloud-load-balancer"

// Retry delays after a failed sync, as upstream's service controller.
const (
	minRetryDelay = 5 * time.Second
	maxRetryDelay = 300 * time.Second
)

// Cloud is what the controller needs from the provider: the router.
type Cloud interface {
	cloudprovider.LoadBalancer
	// ServesClass reports whether a spec.loadBalancerClass is ours.
	ServesClass(class string) bool
	// PrepareLoadBalancer returns the annotations to write with the
	// finalizer before EnsureLoadBalancer (see router.PrepareLoadBalancer).
	PrepareLoadBalancer(service *corev1.Service) map[string]*string
	// HeldAddresses returns the addresses of every load balancer the
	// router holds for the Service, draining ones included (see
	// router.Router.HeldAddresses).
	HeldAddresses(ctx context.Context, clusterName string, service *corev1.Service) ([]corev1.LoadBalancerIngress, error)
}

// RepairPasser is a Cloud that can read its load balancers in bulk for a
// drift-repair pass (see backends.RepairPasser; the router implements it
// over its backends).
type RepairPasser interface {
	BeginRepairPass(ctx context.Context, clusterName string) (context.Context, func())
}

// Options configure a Controller.
type Options struct {
	// Client writes the Services' finalizers and status.
	Client kubernetes.Interface
	// EventClient writes events; Client when nil.
	EventClient kubernetes.Interface
	Services    coreinformers.ServiceInformer
	Nodes       coreinformers.NodeInformer
	// ClusterName is --cluster-name, passed to the cloud.
	ClusterName string
	// Classless makes the controller serve Services without a class as
	// well: set it when upstream's service controller does not run.
	Classless bool
	// ResyncPeriod is --load-balancer-resync-period: how often every
	// served Service is re-ensured (drift repair); 0 turns it off.
	ResyncPeriod time.Duration
	// RetryMin and RetryMax bound the per-Service retry backoff; upstream's
	// 5 s and 300 s when zero.
	RetryMin, RetryMax time.Duration
	// NodeBatchQuiet and NodeBatchMax bound a batch of node changes (see
	// nodesChanged): 1 s and 5 s when zero.
	NodeBatchQuiet, NodeBatchMax time.Duration
}

// Controller ensures the load balancers of the Services it serves.
type Controller struct {
	cloud    Cloud
	opts     Options
	client   kubernetes.Interface
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	// workers is Run's number of workers (passBacklog).
	workers  atomic.Int32
	recorder record.EventRecorder

	mu sync.Mutex
	// state holds, per Service key, what the controller last did for it:
	// the Service as its last successful sync left it and the nodes its
	// load balancer targets.
	state map[string]*served
	// full holds the Services a reload asked to sync in full (see
	// Reloaded), until a sync takes the mark: a sync already in flight
	// when the reload came replaces the Service's state when it ends, so
	// a mark kept there would be lost.
	full map[string]bool
	// pass is the drift-repair or start-up pass in progress, if any.
	pass *repairPass

	// nodeBatch coalesces node changes (see nodesChanged).
	nodeBatch *batch.Timer
	// flushMu guards flushing (a flush of node changes runs) and
	// flushAgain (a batch closed while it ran): see flushNodes.
	flushMu    sync.Mutex
	flushing   bool
	flushAgain bool
	// nodeGen counts the node changes that matter (nodesChanged); see
	// requeueIfNodesChanged.
	nodeGen atomic.Uint64
	// addrGen counts the changes of included nodes' target addresses
	// (addressesChanged); addrStale holds the Services a call was in
	// flight for meanwhile whose load balancers it handed a node whose
	// addresses changed (see requeueIfNodesChanged), until a sync takes
	// the mark.
	addrGen   atomic.Uint64
	addrStale map[string]bool
}

// served is what the controller knows of a Service it serves.
type served struct {
	svc *corev1.Service
	// ensuring is the version of the Service (of svc's UID) handed to
	// the ensure begun since svc was served, which has not succeeded yet
	// (see track); nil when there is none.
	ensuring *corev1.Service
	// seen holds the resourceVersions of the Service the last sync read
	// and wrote: an update to one of them is the controller's own.
	seen  sets.Set[string]
	nodes nodeSet
	// retry: the next sync is a full one: the last failed (a cloud that
	// converges in steps, as Octavia, answers a RetryError after each), or
	// a reload changed the Service's routing (see Reloaded).
	retry bool
	// fresh: recorded before its first ensure (see track), which has not
	// succeeded yet.
	fresh bool
	// drift holds what a repair sync changed before it failed; the sync
	// that completes the repair reports it. driftFrom are the backends
	// that reported those changes (backends.ChangedBackends).
	drift     []string
	driftFrom []string
}

// New returns a controller; Run starts it.
func New(cloud Cloud, opts Options) (*Controller, error) {
	if opts.Client == nil || opts.Services == nil || opts.Nodes == nil {
		return nil, fmt.Errorf("%s: Client, Services and Nodes are required", Name)
	}
	if opts.EventClient == nil {
		opts.EventClient = opts.Client
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = minRetryDelay
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = maxRetryDelay
	}
	if opts.NodeBatchQuiet <= 0 {
		opts.NodeBatchQuiet = defaultNodeBatchQuiet
	}
	if opts.NodeBatchMax <= 0 {
		opts.NodeBatchMax = defaultNodeBatchMax
	}
	c := &Controller{
		cloud:    cloud,
		opts:     opts,
		client:   opts.Client,
		services: opts.Services.Lister(),
		nodes:    opts.Nodes.Lister(),
		synced:   []cache.InformerSynced{opts.Services.Informer().HasSynced, opts.Nodes.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.RetryMin, opts.RetryMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name}),
		state:     map[string]*served{},
		full:      map[string]bool{},
		addrStale: map[string]bool{},
	}
	c.nodeBatch = &batch.Timer{Quiet: opts.NodeBatchQuiet, Max: opts.NodeBatchMax, Flush: c.flushNodes}
	if s, ok := cloud.(ServiceSyncer); ok {
		s.SetServiceSync(c.syncFull)
	}
	if s, ok := cloud.(ServedReporter); ok {
		s.SetServed(c.servesLB)
	}
	if _, err := opts.Services.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.serviceAdded,
		UpdateFunc: c.serviceUpdated,
		DeleteFunc: c.serviceDeleted,
	}); err != nil {
		return nil, err
	}
	if _, err := opts.Nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.nodesChanged() },
		UpdateFunc: c.nodeUpdated,
		DeleteFunc: func(any) { c.nodesChanged() },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run starts workers and, with a resync period, the drift-repair passes,
// until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	stop := ctx.Done()
	c.recorder = backends.NewEventRecorder(c.opts.EventClient, stop)
	logger := klog.FromContext(ctx).WithValues("controller", Name)
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting", "workers", workers, "classless", c.opts.Classless, "resyncPeriod", c.opts.ResyncPeriod)
	if !cache.WaitForNamedCacheSync(Name, stop, c.synced...) {
		return
	}
	c.workers.Store(int32(max(workers, 1))) //nolint:gosec // --concurrent-service-syncs, a small count.
	c.startStartupPass(ctx)
	for range max(workers, 1) {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	if c.opts.ResyncPeriod > 0 {
		go c.repairEvery(ctx, c.opts.ResyncPeriod)
	}
	<-stop
	logger.Info("Stopping")
}

// repairEvery starts a drift-repair pass every period, the first one
// period after the start: the start-up pass re-checks what was served
// before.
func (c *Controller) repairEvery(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.startRepairPass(ctx)
		}
	}
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		var re *api.RetryError
		if errors.As(err, &re) {
			// The cloud said when to ask again (a load balancer still
			// provisioning), as upstream's controller honours.
			klog.FromContext(ctx).Info("Load balancer not ready yet; retrying", "service", key, "after", re.RetryAfter(), "reason", err.Error())
			c.queue.AddAfter(key, re.RetryAfter())
			return true
		}
		klog.FromContext(ctx).Error(err, "Syncing the Service's load balancer failed; retrying", "service", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// serves reports whether the controller serves the Service: one of our
// classes; without a class, when it serves classless Services, one our
// routing chooses a backend for (routesClassless) or whose load balancer
// the router recorded (the routing may have left it since: its sync
// removes that load balancer). A classless Service of another CCM's (no
// record, no annotation of ours, no default backend) is not served: no
// finalizer, no cloud call, no event.
func (c *Controller) serves(svc *corev1.Service) bool {
	if svc.Spec.LoadBalancerClass != nil {
		return c.cloud.ServesClass(*svc.Spec.LoadBalancerClass)
	}
	return c.opts.Classless && (hasRecord(svc) || c.routesClassless(svc))
}

// routesClassless reports whether the router chooses a backend for a
// classless Service: our annotation multicloud-ccm.io/load-balancer-backend
// (even one naming no backend: the sync says so in an event), else the
// default backend. PrepareLoadBalancer answers it for a copy with no
// record, no address and no UID, whose targets are then all unrecorded.
func (c *Controller) routesClassless(svc *corev1.Service) bool {
	if _, ok := svc.Annotations[string(annotation.LoadBalancerBackend)]; ok {
		return true
	}
	probe := &corev1.Service{Spec: svc.Spec}
	probe.Namespace, probe.Name = svc.Namespace, svc.Name
	return c.cloud.PrepareLoadBalancer(probe) != nil
}

// known reports whether the controller holds state for key.
func (c *Controller) known(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.state[key]
	return ok
}

// mayOwn reports whether the controller serves the Service or may have
// served it: one carrying our finalizer (only this controller puts it),
// or a classed Service with a cleanup finalizer and the router's record,
// whose class has left the config since (it is still cleaned up).
func (c *Controller) mayOwn(svc *corev1.Service) bool {
	return c.serves(svc) || hasFinalizer(svc, Finalizer) ||
		(svc.Spec.LoadBalancerClass != nil && hasCleanupFinalizer(svc) && hasRecord(svc))
}

func (c *Controller) serviceAdded(obj any) {
	svc, ok := obj.(*corev1.Service)
	if !ok || !c.mayOwn(svc) {
		return
	}
	c.enqueue(svc)
}

func (c *Controller) serviceUpdated(old, cur any) {
	o, ok1 := old.(*corev1.Service)
	n, ok2 := cur.(*corev1.Service)
	if !ok1 || !ok2 {
		return
	}
	key := keyOf(n)
	if !c.mayOwn(n) && !c.mayOwn(o) && !c.known(key) {
		return
	}
	if c.ownWrite(key, n) {
		return
	}
	if !relevantChange(o, n) {
		if backendConditionsStale(n) && !backendConditionsStale(o) {
			// The router changed the record or the drains outside a
			// sync (a drain's end): a full sync rewrites the conditions
			// from the Service as it is now.
			c.syncFull(n)
		}
		return
	}
	c.queue.Add(key)
}

// ownWrite reports whether the Service's version is one the controller
// wrote or synced.
func (c *Controller) ownWrite(key string, svc *corev1.Service) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.state[key]
	return ok && st.own(svc)
}

// own reports whether svc is a version the last sync read or wrote.
func (st *served) own(svc *corev1.Service) bool {
	return svc.ResourceVersion != "" && st.seen.Has(svc.ResourceVersion)
}

func (c *Controller) serviceDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	if key := keyOf(svc); c.known(key) {
		c.queue.Add(key)
	}
}

func (c *Controller) enqueue(svc *corev1.Service) { c.queue.Add(keyOf(svc)) }

func keyOf(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }

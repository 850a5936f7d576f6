package process

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/internal/batch"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// The upstream service controller re-targets load balancers only when the
// set of nodes changes: a node added, removed, excluded, or given a
// providerID. It never does when only a node's addresses change. But the
// node controller writes a new node's providerID first and its addresses in
// a second write, and a node created with its providerID already set gets
// its addresses after upstream has synced it. A backend that targets nodes
// by IP (AWS ip targets, Octavia members) would then leave that node out
// until something else changed, possibly for ever.
//
// The router closes that gap itself: when a node's InternalIP or
// ExternalIP addresses change (a Hostname entry or another order is no
// change), every Service whose load balancer the router has ensured in a
// backend that reaches the node by address is updated with the current
// nodes: the backend can target the node, before or after the change, and
// does so by its address (backends.AddressTargeter: not AWS instance
// targets, registered by instance ID; never a backend whose load balancers
// ignore the nodes, backends.NodeIndependent: bare metal). At a churn
// every new node is one such change (none -> its addresses), so a backend
// reaching nodes by identity must not be re-targeted for it: that was
// O(churned nodes x Services) updates (docs/scale.md). Address changes are
// batched as pkg/lbcontroller batches node changes (internal/batch: 1 s
// after the last, 5 s after the first at most), so the nodes a churn
// registers re-target each Service reaching them once per batch, not once
// per node. The update goes
// through the same per-Service lock as the service controller's calls, so
// the two never overlap, and it is skipped for a Service that is being
// deleted or moved. Services of our own classes (loadBalancer.classes,
// served by pkg/lbcontroller, which re-targets, as upstream's controller,
// only when the set of nodes changes) are re-synced the same way, seen
// with their class's default annotations; a class we do not list never is.
//
// The same re-sync closes a second gap: a load balancer ensured with a stale
// node list. Upstream's service worker lists the nodes and calls
// EnsureLoadBalancer; its node-sync worker lists them independently and
// calls UpdateLoadBalancer. The per-Service lock serialises the calls, but
// each list is taken before it: when the Update with the new nodes runs
// first, the Ensure with the older list runs after it and leaves the old
// targets, until the next node-set change. So after EnsureLoadBalancer or
// UpdateLoadBalancer succeeds, still under the lock, the router compares
// what the backend used of the nodes it handed it with what it would use
// of those it would hand it now (the node lister's, a cache read): the
// nodes it can target, and of each its addresses when the backend reaches
// it by address, else its providerID (backend.targetKey). A node whose
// other fields changed meanwhile (its labels or taints written at its
// initialisation) is no difference. If they differ, the Service is queued
// here and updated with the current nodes once the lock is released. The
// re-sync's own update calls the backend directly, so it never re-queues.

// Event reason for a failed node-address re-sync. It is stable.
const reasonNodeResyncFailed = "LoadBalancerNodeResyncFailed"

const (
	// addressResyncWorkers bounds how many Services are re-synced at once.
	addressResyncWorkers = 2
	// ToBeDeletedTaint is the cluster autoscaler's taint; upstream leaves
	// such nodes out of load balancers.
	ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"
)

// addressBatchQuiet and addressBatchMax bound a batch of node address
// changes, as pkg/lbcontroller's node batch: 1 s after the last change, 5 s
// after the first at most. Variables for tests only.
var (
	AddressBatchQuiet = time.Second
	AddressBatchMax   = 5 * time.Second
)

// AddressResync is the node-address watcher. It lives for the process
// (see process.go): Services queued, and failed re-syncs waiting for their
// retry, survive a reload; each re-sync runs on the configuration in use
// when a worker picks it up.
type AddressResync struct {
	St       *Shared
	nodes    corelisters.NodeLister
	Services corelisters.ServiceLister
	synced   []cache.InformerSynced
	Queue    workqueue.TypedRateLimitingInterface[resyncKey]
	// Address changes are batched as pkg/lbcontroller batches node
	// changes: the Services they concern wait in pending until the batch
	// is flushed, so a churn re-targets each Service once per batch, not
	// once per node.
	Batch     *batch.Timer
	pendingMu sync.Mutex
	// Pending maps each Service waiting for the flush to its key: a node
	// address change's (a plain re-sync) or a reload's re-target (from
	// set); the plain one wins, as it updates every load balancer. Made
	// on first use.
	Pending map[types.NamespacedName]resyncKey
	// StaleQueued counts the Services queued because their load balancer
	// was ensured or updated with a stale node list.
	StaleQueued atomic.Int64
	// AddressQueued counts the Services queued after a node's address
	// change.
	AddressQueued atomic.Int64
	// owed maps a key whose re-sync failed in some of the Service's
	// backends and succeeded in the others to the failed ones: its retries
	// update only those (partialFailure). A fresh queueing of the key (a
	// new change) clears it and marks the key fresh until a worker takes
	// it: a partial failure of a re-sync in flight meanwhile owes every
	// backend again (the others' update predates the change).
	owedMu sync.Mutex
	owed   map[resyncKey][]string
	fresh  map[resyncKey]bool
}

// StartWatches starts, once for the process, the node-address re-sync and
// the forgetting of deleted Services' state. Before Initialize gave a stop
// channel, nothing is started (a later SetInformers will).
func (st *Shared) StartWatches(factory informers.SharedInformerFactory) {
	st.forgetOnce.Do(func() { st.forgetDeletedServices(factory) })
	stop := st.stopCh()
	if stop == nil {
		klog.Info("SetInformers before Initialize: load balancers will not be re-targeted when node addresses change")
		return
	}
	st.drainOnce.Do(func() { st.startDrainTimer(factory, stop) })
	st.resyncOnce.Do(func() {
		if err := st.startAddressResync(factory, stop); err != nil {
			klog.ErrorS(err, "Load balancers will not be re-targeted when node addresses change")
		}
	})
}

// startAddressResync registers the node and Service handlers and starts
// the workers; they stop with stop.
func (st *Shared) startAddressResync(factory informers.SharedInformerFactory, stop <-chan struct{}) error {
	nodeInformer := factory.Core().V1().Nodes()
	svcInformer := factory.Core().V1().Services()
	a := &AddressResync{
		St:       st,
		nodes:    nodeInformer.Lister(),
		Services: svcInformer.Lister(),
		Queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[resyncKey](),
			workqueue.TypedRateLimitingQueueConfig[resyncKey]{Name: "multicloud_node_address_resync"}),
	}
	a.Batch = &batch.Timer{Quiet: AddressBatchQuiet, Max: AddressBatchMax, Flush: a.flush}
	reg, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			oldNode, ok1 := oldObj.(*corev1.Node)
			newNode, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && targetAddressesChanged(oldNode, newNode) && StableNode(newNode) {
				a.EnqueueFor(oldNode, newNode)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching node addresses: %w", err)
	}
	a.synced = []cache.InformerSynced{reg.HasSynced, svcInformer.Informer().HasSynced}
	st.Resync.Store(a)
	go a.run(stop)
	return nil
}

// targetAddressesChanged reports whether a node's InternalIP or
// ExternalIP addresses changed, in any order.
func targetAddressesChanged(oldNode, node *corev1.Node) bool {
	if slices.Equal(oldNode.Status.Addresses, node.Status.Addresses) {
		return false // the common case (a heartbeat): no allocation.
	}
	return !slices.Equal(backend.TargetAddresses(oldNode), backend.TargetAddresses(node))
}

// EnqueueFor queues every Service the router has ensured whose backend
// reaches the node by address before or after its address change (a node
// that lost its address must leave the targets too).
func (a *AddressResync) EnqueueFor(oldNode, node *corev1.Node) {
	svcs, err := a.Services.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Cannot list Services to re-target after a node address change", "node", node.Name)
		return
	}
	r, done := a.St.Current()
	defer done()
	a.pendingMu.Lock()
	defer a.pendingMu.Unlock()
	if a.Pending == nil {
		a.Pending = map[types.NamespacedName]resyncKey{}
	}
	for _, svc := range svcs {
		svc = r.WithClassDefaults(svc)
		bs := r.EnsuredIn(svc)
		if len(bs) == 0 {
			// Its first sync may be in flight, handed the old address, and
			// pkg/lbcontroller's calls are not checked for a stale node
			// list (RequeuesOnNodeChange): the re-sync waits for the
			// Service's lock, then for its status (errNotPublished).
			bs = r.UnpublishedIn(svc)
		}
		for _, b := range bs {
			if b.RetargetsOn(svc, oldNode, node) {
				a.AddressQueued.Add(1)
				name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
				a.Pending[name] = resyncKey{NamespacedName: name}
				break
			}
		}
	}
	if len(a.Pending) > 0 {
		a.Batch.Changed()
	}
}

// flush queues the Services the batch's address changes concern, each
// once.
func (a *AddressResync) flush() {
	a.pendingMu.Lock()
	keys := a.Pending
	a.Pending = nil
	a.pendingMu.Unlock()
	for _, key := range keys {
		a.markFresh(key)
		a.Queue.Add(key)
	}
}

// AddRetarget puts the Service in the batch for a re-target after a
// reload that may change which nodes the load balancers target (from is
// the configuration it replaced): a load balancer whose targets from and
// the configuration in use agree on is not updated (see sync). A node
// address change pending for it, or coming before the flush, covers it; a
// second reload before the flush makes it a plain re-sync.
func (a *AddressResync) AddRetarget(svc *corev1.Service, from Configuration) {
	name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	a.pendingMu.Lock()
	if a.Pending == nil {
		a.Pending = map[types.NamespacedName]resyncKey{}
	}
	switch k, ok := a.Pending[name]; {
	case !ok:
		a.Pending[name] = resyncKey{NamespacedName: name, from: from}
	case k.from != nil && k.from != from:
		// A second reload before the flush: the load balancer may hold
		// either configuration's targets, or targets a sync gave it
		// between the two (TestProbe60bReloadAndBackBeforeFlushLeavesIntermediateTargets):
		// no comparison tells, so every backend is updated.
		a.Pending[name] = resyncKey{NamespacedName: name}
	}
	a.pendingMu.Unlock()
	a.Batch.Changed()
}

// resyncKey is a Service queued for the re-sync. reroute is set when only
// its target moved (a reload, see reroute), not its nodes: the re-sync
// then runs the Service's full sync if its target is still one its record
// does not name as serving when a worker picks it up, and updates no load
// balancer where it is. Before, a reload moving the default re-targeted
// every classless Service's load balancer where it was, with unchanged
// nodes: a cloud update per Service (5 ELBv2 calls an NLB) for nothing.
// uid is the Service a reroute was queued for: one re-created under its
// name since is left to its controller's first sync.
//
// full is set for a full sync of the Service (Configuration.Sync): the
// drain timer's, at a drain's end, and a reload's for a Service whose
// record names a backend it added back.
//
// from is set for a re-target after a reload that may change which nodes
// the load balancers target (AddRetarget): the configuration the reload
// replaced. A backend's load balancer is updated only when the nodes it
// and the configuration in use have it target differ.
type resyncKey struct {
	types.NamespacedName
	reroute bool
	full    bool
	uid     types.UID
	from    Configuration
}

// Add queues the Service for a re-sync with the current nodes.
func (a *AddressResync) Add(svc *corev1.Service) {
	key := resyncKey{NamespacedName: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}}
	a.markFresh(key)
	a.Queue.Add(key)
}

// AddSync queues the Service for a full sync (see fullSync).
func (a *AddressResync) AddSync(svc *corev1.Service) {
	a.Queue.Add(resyncKey{NamespacedName: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, full: true})
}

// AddReroute queues the Service for a re-route: its full sync, if its
// target still moved when a worker picks it up (see reroute).
func (a *AddressResync) AddReroute(svc *corev1.Service) {
	a.Queue.Add(resyncKey{NamespacedName: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, reroute: true, uid: svc.UID})
}

func (a *AddressResync) run(stop <-chan struct{}) {
	runQueue(stop, a.synced, a.Queue.ShutDown, addressResyncWorkers, a.next)
}

// runQueue runs a process-level queue's workers: once the informers
// synced, workers goroutines call next until it reports the queue shut
// down; at stop the queue is shut down and the workers waited for.
func runQueue(stop <-chan struct{}, synced []cache.InformerSynced, shutdown func(), workers int, next func(context.Context) bool) {
	defer shutdown()
	if !cache.WaitForCacheSync(stop, synced...) {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next(ctx) {
			}
		})
	}
	<-stop
	cancel()
	shutdown()
	wg.Wait()
}

func (a *AddressResync) next(ctx context.Context) bool {
	key, quit := a.Queue.Get()
	if quit {
		return false
	}
	defer a.Queue.Done(key)
	err := a.sync(ctx, key)
	switch {
	case errors.Is(err, errNoClusterName):
		a.Queue.AddAfter(key, time.Second) // quietly: the first sync tells it soon
		return true
	case errors.Is(err, errNotPublished) && a.Queue.NumRequeues(key) < maxUnpublishedRetries:
		a.Queue.AddRateLimited(key) // quietly: the status is on its way
		return true
	case errors.Is(err, errNotPublished):
	case errors.As(err, new(*partialFailure)):
		// Retry only the backends that failed: before, every retry while
		// one backend was down updated the others again with the same
		// nodes (TestProbe60FailingBackendRepeatsUpdatesOfTheOther).
		// The key keeps its backoff (a key of its own per backend started
		// again at 5 ms: TestProbe60bPartialSuccessRestartsTheFailingBackendsBackoff).
		var pf *partialFailure
		errors.As(err, &pf)
		klog.ErrorS(err, "Re-syncing a load balancer failed in some backends; will retry those", "service", key.NamespacedName, "backends", pf.failed)
		a.owe(key, pf.failed)
		a.Queue.AddRateLimited(key)
		return true
	case err != nil:
		klog.ErrorS(err, "Re-syncing a load balancer failed; will retry", "service", key.NamespacedName, "full", key.full, "reroute", key.reroute)
		a.Queue.AddRateLimited(key)
		return true
	}
	a.owe(key, nil)
	a.Queue.Forget(key)
	return true
}

// markFresh clears what key's re-sync owed: a new change needs every
// backend again.
func (a *AddressResync) markFresh(key resyncKey) {
	a.owedMu.Lock()
	defer a.owedMu.Unlock()
	delete(a.owed, key)
	if a.fresh == nil {
		a.fresh = map[resyncKey]bool{}
	}
	a.fresh[key] = true
}

// owe records the backends key's re-sync still owes an update (nil:
// none), unless the key was queued fresh while the re-sync ran.
func (a *AddressResync) owe(key resyncKey, backends []string) {
	a.owedMu.Lock()
	defer a.owedMu.Unlock()
	if backends == nil || a.fresh[key] {
		delete(a.owed, key)
		return
	}
	if a.owed == nil {
		a.owed = map[resyncKey][]string{}
	}
	a.owed[key] = backends
}

// takeOwed starts key's re-sync: it returns the backends it still owes an
// update, nil for every backend, and ends the key's fresh mark.
func (a *AddressResync) takeOwed(key resyncKey) []string {
	a.owedMu.Lock()
	defer a.owedMu.Unlock()
	delete(a.fresh, key)
	return a.owed[key]
}

// errNotPublished is a re-sync finding the Service's load balancer
// recorded in its targets but its status not written yet: the sync that
// queued it (a stale node list, see requeueIfStale) is still publishing
// it. The re-sync is retried, with backoff, maxUnpublishedRetries times
// (about 5 s in all); before, it was dropped, and the load balancer kept
// the stale nodes until the next node change.
var errNotPublished = errors.New("load balancer ensured but its status not published yet")

const maxUnpublishedRetries = 10

// partialFailure is a re-sync whose update failed in the backends failed
// and succeeded in others: only those are retried.
type partialFailure struct {
	failed []string
	err    error
}

func (e *partialFailure) Error() string { return e.err.Error() }
func (e *partialFailure) Unwrap() error { return e.err }

// errNoClusterName is a full sync queued before any call of the service
// controller told the router the cluster's name: it is retried a second
// later.
var errNoClusterName = errors.New("no sync has told the cluster name yet")

// sync updates the Service's load balancer with the current nodes, if the
// router still holds it where the Service wants it; a full key runs the
// Service's full sync instead (fullSync), a reroute key its full sync if
// its target moved (reroute).
func (a *AddressResync) sync(ctx context.Context, key resyncKey) error {
	switch {
	case key.full:
		return a.fullSync(ctx, key)
	case key.reroute:
		return a.reroute(ctx, key)
	}
	owed := a.takeOwed(key)
	svc, err := a.Services.Services(key.Namespace).Get(key.Name)
	if err != nil {
		return ignoreNotFound(err)
	}
	defer a.St.Lock(svc.UID)()
	// Look again under the lock: the service controller may have deleted
	// or moved the load balancer while this waited. The configuration in
	// use is taken under the lock too, so a reload applied meanwhile is the
	// one this re-sync follows.
	if svc, err = a.Services.Services(key.Namespace).Get(key.Name); err != nil {
		return ignoreNotFound(err)
	}
	r, done := a.St.Current()
	defer done()
	clusterName, _ := a.St.ClusterName.Load().(string)
	if r.Rerouting(svc) {
		// Its target moved: its full sync moves it (queued, as it takes
		// the lock held here); the load balancers that exist are updated
		// meanwhile (EnsuredIn: those still serving it).
		a.AddReroute(svc)
	}
	// The backend sees a classed Service as UpdateLoadBalancer hands it:
	// with its class's default annotations (the target type, say).
	orig := svc
	svc = r.WithClassDefaults(svc)
	bs := r.EnsuredIn(svc)
	if len(bs) == 0 && len(r.UnpublishedIn(svc)) > 0 {
		return errNotPublished
	}
	if len(bs) == 0 || clusterName == "" {
		return nil
	}
	nodes, err := a.StableNodes()
	if err != nil {
		return err
	}
	cause := "a node address change"
	if key.from != nil {
		cause = "a cloud-config reload that changes the nodes load balancers target"
	}
	var errs []error
	var failed []string
	updated := false
	for _, b := range bs {
		if owed != nil && !slices.Contains(owed, b.Name) {
			continue
		}
		targets := r.Targetable(b, svc, nodes)
		if key.from != nil && key.from.TargetsUnchanged(b.Name, orig, nodes, targets) {
			continue
		}
		start := time.Now()
		err = b.UpdateLoadBalancer(ctx, clusterName, svc, targets)
		if err != nil {
			r.Warn(ctx, svcstate.ServiceRef(svc), reasonNodeResyncFailed,
				fmt.Sprintf("Cannot update the load balancer's targets in backend %s after %s: %s", b.Name, cause, b.Unnamed(err)))
			errs = append(errs, err)
			failed = append(failed, b.Name)
			continue
		}
		klog.FromContext(ctx).V(2).Info("Re-targeted load balancer after "+cause,
			"service", key.NamespacedName, "backend", b.Name, "duration", time.Since(start))
		updated = true
	}
	if updated && len(failed) > 0 {
		return &partialFailure{failed: failed, err: errors.Join(errs...)}
	}
	return errors.Join(errs...)
}

// fullSync runs the Service's full sync on the configuration in use
// (Configuration.Sync), with the nodes upstream's service controller would
// hand it. The sync takes the Service's lock itself (it is the router's
// EnsureLoadBalancer), so the copy is read before it, as upstream's
// controller reads its own. A Service the controller serving it syncs
// itself (SetServiceSync: pkg/lbcontroller, classless mode included) is
// queued there instead: the router never syncs it beside that controller.
func (a *AddressResync) fullSync(ctx context.Context, key resyncKey) error {
	svc, err := a.Services.Services(key.Namespace).Get(key.Name)
	if err != nil {
		return ignoreNotFound(err)
	}
	r, done := a.St.Current()
	defer done()
	return a.syncWith(ctx, r, svc, false)
}

// reroute runs, for a Service whose target a reload moved (Rerouted,
// or UpdateLoadBalancer finding it moving), its full sync (fullSync) on
// the configuration in use when a worker picks it up, if its target is
// still one its record does not name as serving (Configuration.Rerouting):
// a reload that moved the default and moved it back before costs nothing.
// The sync records the new target, creates or moves the load balancer and
// writes the Service, as the sync of upstream's controller would (issue
// 40: before, the re-route wrote the record itself, outside any sync, to
// make upstream's controller sync the Service). Under pkg/lbcontroller
// (SetServiceSync) that controller's own full sync does it, the only
// writer. A Service deleted, or re-created under its name, since it was
// queued is left alone: a new one is its controller's to sync first.
func (a *AddressResync) reroute(ctx context.Context, key resyncKey) error {
	svc, err := a.Services.Services(key.Namespace).Get(key.Name)
	if err != nil {
		return ignoreNotFound(err)
	}
	if svc.UID != key.uid {
		return nil
	}
	r, done := a.St.Current()
	defer done()
	if !r.Rerouting(svc) {
		return nil
	}
	return a.syncWith(ctx, r, svc, true)
}

// syncWith hands the Service to the controller serving it when that
// controller syncs Services itself (SetServiceSync), else runs its full
// sync on r with the nodes upstream's service controller would hand.
// A re-route (reroute set) leaves, under upstream's controller, a Service
// without the cleanup finalizer that controller adds before its first
// EnsureLoadBalancer (service.kubernetes.io/load-balancer-cleanup): it has
// not synced the Service yet, and its first sync, on the configuration
// then in use, routes it. A load balancer the router created before that
// finalizer leaked when the Service was deleted before upstream's first
// sync: upstream, which never saw it, deletes nothing.
func (a *AddressResync) syncWith(ctx context.Context, r Configuration, svc *corev1.Service, reroute bool) error {
	if f := a.St.ServiceSync.Load(); f != nil && (*f)(svc) {
		return nil
	}
	if reroute && !servicehelper.HasLBFinalizer(svc) {
		return nil
	}
	clusterName, _ := a.St.ClusterName.Load().(string)
	if clusterName == "" {
		return errNoClusterName
	}
	nodes, err := a.StableNodes()
	if err != nil {
		return err
	}
	return r.Sync(ctx, clusterName, svc.DeepCopy(), nodes)
}

// StableNodes returns the lister's nodes upstream would put in a load
// balancer (see StableNode).
func (a *AddressResync) StableNodes() ([]*corev1.Node, error) {
	all, err := a.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	nodes := make([]*corev1.Node, 0, len(all))
	for _, n := range all {
		if StableNode(n) {
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

// ignoreNotFound turns a lister's not-found into nil: the Service is gone,
// nothing to do.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// StableNode mirrors the upstream service controller's choice of nodes for
// a load balancer: not being deleted, not excluded by the
// node.kubernetes.io/exclude-from-external-load-balancers label, and not
// tainted for deletion by the cluster autoscaler.
func StableNode(n *corev1.Node) bool {
	if n.DeletionTimestamp != nil {
		return false
	}
	if v, ok := n.Labels[corev1.LabelNodeExcludeBalancers]; ok {
		if excluded, err := strconv.ParseBool(v); err != nil || excluded {
			return false
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// forgetDeletedServices drops the router's per-Service state when a
// Service is deleted, so Service churn does not grow the router's memory.
func (st *Shared) forgetDeletedServices(factory informers.SharedInformerFactory) {
	inf := factory.Core().V1().Services().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if svc, ok := obj.(*corev1.Service); ok {
				st.Forget(svc.UID)
			}
		},
	})
	if err != nil {
		klog.ErrorS(err, "Cannot watch Service deletions; the router's per-Service state will not shrink")
	}
}

// QueueReroute queues the Service for a re-route by the re-sync (its full
// sync, see AddressResync.reroute), once it runs.
func (st *Shared) QueueReroute(svc *corev1.Service) {
	if a := st.Resync.Load(); a != nil {
		a.AddReroute(svc)
	}
}

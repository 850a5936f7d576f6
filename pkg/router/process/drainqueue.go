package process

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// drainTimer has a drained load balancer deleted when its drain ends,
// even if nothing else syncs the Service then: it queues the Service for a
// full sync, whose EnsureLoadBalancer ends the drain (retire) and writes
// the Service; it writes nothing itself (issue 40: only a sync writes a
// Service, from the copy it holds). The sync is the one of the controller
// serving the Service when that controller syncs Services itself
// (SetServiceSync: pkg/lbcontroller), else the router's own, through the
// re-sync (AddressResync.AddSync: under upstream's service controller,
// which the router cannot queue a Service in). It lives for the process
// (see process.go), so a reload neither loses nor repeats a drain. It is
// armed from the Services' multicloud-ccm.io/load-balancer-draining
// annotation as the informer lists and updates them: a restarted process,
// or a new leader (the informers are set only once it leads), picks up
// every drain in progress and ends it on time. A drain still running after
// the sync is armed again by that sync (QueueDrain) and by the informer's
// update.
type drainTimer struct {
	st       *Shared
	services corelisters.ServiceLister
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[types.NamespacedName]
}

// drainWorkers bounds how many drains end at once.
const drainWorkers = 2

// startDrainTimer registers the Service handler and starts the workers;
// they stop with stop.
func (st *Shared) startDrainTimer(factory informers.SharedInformerFactory, stop <-chan struct{}) {
	inf := factory.Core().V1().Services()
	t := &drainTimer{
		st:       st,
		services: inf.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "multicloud_load_balancer_drain"}),
	}
	reg, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.arm(obj) },
		UpdateFunc: func(_, obj any) { t.arm(obj) },
	})
	if err != nil {
		klog.ErrorS(err, "Cannot watch Services for drains; a drained load balancer is deleted at the Service's next sync only")
		return
	}
	t.synced = reg.HasSynced
	st.drainTimer.Store(t)
	go t.run(stop)
}

// arm queues the Service for when its first drain ends.
func (t *drainTimer) arm(obj any) {
	svc, ok := obj.(*corev1.Service)
	if !ok || svc.Annotations[string(annotation.LoadBalancerDraining)] == "" {
		return
	}
	if end, ok := svcstate.ParseDraining(svc).Next(); ok {
		t.at(svc, end)
	}
}

func (t *drainTimer) at(svc *corev1.Service, end time.Time) {
	t.queue.AddAfter(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, time.Until(end))
}

// QueueDrain arms the drain timer for the Service's drain ending at end.
func (st *Shared) QueueDrain(svc *corev1.Service, end time.Time) {
	if t := st.drainTimer.Load(); t != nil {
		t.at(svc, end)
	}
}

func (t *drainTimer) run(stop <-chan struct{}) {
	runQueue(stop, []cache.InformerSynced{t.synced}, t.queue.ShutDown, drainWorkers, t.next)
}

func (t *drainTimer) next(context.Context) bool {
	key, quit := t.queue.Get()
	if quit {
		return false
	}
	defer t.queue.Done(key)
	if err := t.sync(key); err != nil {
		klog.ErrorS(err, "Cannot queue a Service whose load balancer's drain ended for its sync; will retry", "service", key)
		t.queue.AddRateLimited(key)
		return true
	}
	t.queue.Forget(key)
	return true
}

// sync queues the Service, whose drain ended, for a full sync: by the
// controller serving it when that controller syncs Services itself
// (SetServiceSync), else by the router's re-sync (upstream's service
// controller). Before, under upstream's controller, the timer deleted the
// drained load balancers and wrote the Service (its record, draining
// annotation and status) itself, outside any sync.
func (t *drainTimer) sync(key types.NamespacedName) error {
	svc, err := t.services.Services(key.Namespace).Get(key.Name)
	if err != nil {
		return ignoreNotFound(err)
	}
	if f := t.st.ServiceSync.Load(); f != nil && (*f)(svc) {
		return nil
	}
	a := t.st.Resync.Load()
	if a == nil {
		return errNoResync
	}
	a.AddSync(svc)
	return nil
}

// errNoResync is the re-sync not running yet (it starts with the timer,
// see StartWatches).
var errNoResync = errors.New("the router's re-sync is not running yet")

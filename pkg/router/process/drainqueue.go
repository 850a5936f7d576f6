package process

import (
	"context"
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

// drainTimer deletes a drained load balancer when its drain ends, even if
// nothing else syncs the Service then. It lives for the process (see
// process.go), so a reload neither loses nor repeats a drain. It is armed
// from the Services' multicloud-ccm.io/load-balancer-draining annotation as
// the informer lists and updates them: a restarted process, or a new
// leader (the informers are set only once it leads), picks up every drain
// in progress and ends it on time.
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

func (t *drainTimer) next(ctx context.Context) bool {
	key, quit := t.queue.Get()
	if quit {
		return false
	}
	defer t.queue.Done(key)
	next, err := t.sync(ctx, key)
	if err != nil {
		klog.ErrorS(err, "Ending a load balancer's drain failed; will retry", "service", key)
		t.queue.AddRateLimited(key)
		return true
	}
	t.queue.Forget(key)
	if !next.IsZero() {
		t.queue.AddAfter(key, time.Until(next))
	}
	return true
}

// sync ends the Service's drains that are over. When a controller that
// syncs Services itself serves this one (SetServiceSync), the timer only
// queues it there for a full sync, whose EnsureLoadBalancer ends them
// (retire) and whose one write publishes the result; a drain still running
// then is re-armed by that sync. Otherwise (upstream's service controller,
// which the router cannot queue a Service in) it deletes the load balancers
// whose drain ended itself, under the Service's lock, on the configuration
// in use, and returns when the next drain ends.
func (t *drainTimer) sync(ctx context.Context, key types.NamespacedName) (time.Time, error) {
	svc, err := t.services.Services(key.Namespace).Get(key.Name)
	if err != nil {
		return time.Time{}, ignoreNotFound(err)
	}
	if f := t.st.ServiceSync.Load(); f != nil && (*f)(svc) {
		return time.Time{}, nil
	}
	defer t.st.Lock(svc.UID)()
	if svc, err = t.services.Services(key.Namespace).Get(key.Name); err != nil {
		return time.Time{}, ignoreNotFound(err)
	}
	r, done := t.st.Current()
	defer done()
	return r.FinishDrains(ctx, r.WithClassDefaults(svc))
}

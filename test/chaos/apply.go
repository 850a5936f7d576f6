package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// apply carries out one operation (but AWSKeyRotate, which steps runs
// with rotateKey: it judges what it did). Operations that no longer apply (a
// shrunk sequence edits a Service it never created, say) do what they can:
// an edit creates, a delete of nothing does nothing.
func (w *World) apply(ctx context.Context, op Op) error {
	switch op.Kind {
	case SvcApply:
		return w.applyShape(ctx, op.Name, *op.Shape)
	case SvcDelete:
		return ignoreGone(w.c.CoreV1().Services(serviceNS).Delete(ctx, op.Name, metav1.DeleteOptions{}))
	case SvcRecreate:
		return w.recreate(ctx, op.Name, *op.Shape)
	case StrangerApply:
		return w.stranger(ctx, op.Name, op.Addr)
	case NodeJoin:
		return w.join(ctx, op)
	case NodeLeave:
		return ignoreGone(w.c.CoreV1().Nodes().Delete(ctx, op.Name, metav1.DeleteOptions{}))
	case NodeExclude:
		v := any(nil)
		if op.Flag {
			v = "true"
		}
		return w.patchNode(ctx, op.Name, map[string]any{"metadata": map[string]any{"labels": map[string]any{labelExclude: v}}}, "")
	case NodeAddress:
		return w.patchNode(ctx, op.Name, map[string]any{"status": map[string]any{"addresses": []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: op.Addr}, {Type: corev1.NodeHostName, Address: op.Name}}}}, "status")
	case NodeReady:
		return ignoreGone(framework.SetNodeReady(ctx, w.c, op.Name, readiness(op.Flag)))
	case NodeTerminate:
		return w.terminate(ctx, op)
	case Reload:
		w.cfgPending = w.replicaHashes(ctx)
		return w.writeConfig(*op.Config)
	case KillLeader:
		return w.killLeader(ctx)
	case PauseLeader:
		return w.pauseLeader()
	case AWSThrottle:
		w.fake.Throttle(op.N)
		w.throttleEnd = w.fake.TotalAttempts() + op.N
	case AWSOutage:
		w.fake.SetOutage(op.Flag)
		w.outage = op.Flag
	case OSOutage:
		if w.os != nil {
			w.os.proxy.setDown(op.Flag)
		}
	case OSFail:
		if w.os != nil {
			w.os.proxy.fail(op.N)
		}
	case OSHang:
		if w.os != nil {
			w.os.proxy.hang(op.N)
		}
	case WatchDelay:
		w.watchFault(time.Duration(op.N) * time.Second)
	case WatchDrop:
		w.watchFault(0)
	}
	return nil
}

func readiness(ready bool) corev1.ConditionStatus {
	if ready {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

// ignoreGone drops a not-found error (the object already gone) and any
// error wrapping one.
func ignoreGone(err error) error {
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// newService builds the Service of shape s.
func newService(name string, s Shape) *corev1.Service {
	svc := framework.NewLoadBalancerService(serviceNS, name)
	setShape(svc, s)
	return svc
}

// setShape makes svc look like s, leaving what others wrote (the router's
// annotations, the node ports) alone.
func setShape(svc *corev1.Service, s Shape) {
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	for k, v := range map[string]string{annBackend: s.Backends, annDrain: s.Drain, annIPs: s.IPs, annShare: s.Share} {
		if v == "" {
			delete(svc.Annotations, k)
		} else {
			svc.Annotations[k] = v
		}
	}
	svc.Spec.Type = corev1.ServiceType(s.Type)
	svc.Spec.LoadBalancerClass = nil
	if s.Class != "" && s.Type == serviceTypeLB {
		svc.Spec.LoadBalancerClass = &s.Class
	}
	ports := make([]corev1.ServicePort, 0, len(s.Ports))
	for _, p := range s.Ports {
		sp := corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Protocol: corev1.ProtocolTCP, Port: p}
		sp.TargetPort.IntVal = p
		if i := slices.IndexFunc(svc.Spec.Ports, func(x corev1.ServicePort) bool { return x.Port == p }); i >= 0 && s.Type == serviceTypeLB {
			sp.NodePort = svc.Spec.Ports[i].NodePort
		}
		ports = append(ports, sp)
	}
	svc.Spec.Ports = ports
	if s.Type != serviceTypeLB {
		svc.Spec.ExternalTrafficPolicy = ""
		svc.Spec.AllocateLoadBalancerNodePorts = nil
		svc.Spec.HealthCheckNodePort = 0
	}
}

// applyShape creates the Service or changes it to s. A class cannot change
// on a LoadBalancer Service (the API refuses it): the Service is made a
// ClusterIP first, then a LoadBalancer of the new class, as a user must.
func (w *World) applyShape(ctx context.Context, name string, s Shape) error {
	return w.retry(ctx, func() error {
		svcs := w.c.CoreV1().Services(serviceNS)
		cur, err := svcs.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = svcs.Create(ctx, newService(name, s), metav1.CreateOptions{})
			return err
		}
		if err != nil || cur.DeletionTimestamp != nil {
			return err // being deleted: its cleanup goes on
		}
		curClass := ""
		if cur.Spec.LoadBalancerClass != nil {
			curClass = *cur.Spec.LoadBalancerClass
		}
		if cur.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Type == serviceTypeLB && curClass != s.Class {
			via := s
			via.Type = serviceTypeCIP
			setShape(cur, via)
			if cur, err = svcs.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		setShape(cur, s)
		_, err = svcs.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// recreate removes the cleanup finalizer by hand, deletes the Service and
// creates it again with s under the same name.
func (w *World) recreate(ctx context.Context, name string, s Shape) error {
	svcs := w.c.CoreV1().Services(serviceNS)
	err := w.retry(ctx, func() error {
		cur, err := svcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if slices.ContainsFunc(cur.Finalizers, isCleanupFinalizer) {
			cur.Finalizers = slices.DeleteFunc(slices.Clone(cur.Finalizers), isCleanupFinalizer)
			if cur, err = svcs.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		uid := cur.UID
		return svcs.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	})
	if ignoreGone(err) != nil {
		return err
	}
	return w.retry(ctx, func() error {
		_, err := svcs.Create(ctx, newService(name, s), metav1.CreateOptions{})
		return err
	})
}

// stranger creates a classless Service with no annotation and writes its
// status as another controller serving such Services would.
func (w *World) stranger(ctx context.Context, name, addr string) error {
	svcs := w.c.CoreV1().Services(serviceNS)
	return w.retry(ctx, func() error {
		cur, err := svcs.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cur, err = svcs.Create(ctx, framework.NewLoadBalancerService(serviceNS, name), metav1.CreateOptions{})
		}
		if err != nil || cur.DeletionTimestamp != nil {
			return err
		}
		cur.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: addr}}
		_, err = svcs.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// retry runs f until it succeeds or fails otherwise than by a conflict
// or an object still there (a deletion in progress), for up to 10 s.
func (w *World) retry(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil || (!apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err)) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// join registers a Node as its kubelet would.
func (w *World) join(ctx context.Context, op Op) error {
	var tweaks []framework.NodeTweak
	switch op.Cloud {
	case "metal":
		i := slices.Index(metalNodes, op.Name)
		tweaks = append(tweaks, framework.WithAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: metalNodeIP(i)}))
		if op.Flag {
			tweaks = append(tweaks, framework.WithProviderID("baremetal://"+op.Name))
		}
	case "aws":
		if in, ok := w.awsNodes[op.Name]; ok {
			tweaks = append(tweaks, framework.WithProviderID(fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)))
		}
	case "vsphere":
		if vm, ok := w.vsNodes[op.Name]; ok {
			tweaks = append(tweaks, framework.WithProviderID(vm.ProviderID()))
		}
	}
	_, err := framework.CreateNode(ctx, w.c, framework.NewNode(op.Name, tweaks...))
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// terminate ends the Node's instance behind its back and marks the Node
// NotReady, as its kubelet going silent would.
func (w *World) terminate(ctx context.Context, op Op) error {
	switch op.Cloud {
	case "aws":
		if in, ok := w.awsNodes[op.Name]; ok {
			w.fake.SetInstanceState(in.ID, "terminated")
		}
	case "vsphere":
		if vm, ok := w.vsNodes[op.Name]; ok {
			if _, still := w.sim.VM(vm.Name); still {
				if err := w.sim.Destroy(ctx, vm.Name); err != nil {
					return err
				}
			}
		}
	}
	return ignoreGone(framework.SetNodeReady(ctx, w.c, op.Name, corev1.ConditionFalse))
}

// instanceExists reports whether the Node's instance still exists in its
// cloud (bare-metal machines always do: the inventory never changes).
func (w *World) instanceExists(cloud, name string) bool {
	switch cloud {
	case "aws":
		in, ok := w.awsNodes[name]
		if !ok {
			return false
		}
		got, ok := w.fake.GetInstance(in.ID)
		return ok && got.State != "terminated"
	case "vsphere":
		vm, ok := w.vsNodes[name]
		if !ok {
			return false
		}
		_, ok = w.sim.VM(vm.Name)
		return ok
	}
	return true
}

func (w *World) patchNode(ctx context.Context, name string, patch map[string]any, sub string) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	var subs []string
	if sub != "" {
		subs = []string{sub}
	}
	_, err = w.c.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, subs...)
	return ignoreGone(err)
}

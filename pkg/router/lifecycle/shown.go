package lifecycle

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// One Service, several load balancers, one status: the status lists the
// addresses of every backend serving the Service and of those draining
// while announced from the status (bare metal). A backend reads the status
// as what it gave the Service (bare metal keeps, or replaces with a
// LoadBalancerIPReplaced Warning, an address it finds there outside its
// pools), so each backend is handed the Service with the addresses of the
// other backends that keep serving it (targets, draining ones, and those
// about to drain) taken out of its status. Which addresses are whose, the
// router remembers from the backends' answers (svcstate.States, shown); a new
// process knows it from each Service's first sync on.

// handedTo returns the Service as backend b is handed it: with the
// addresses remembered for the other backends that keep serving it (the
// other targets, those draining, and, with a drain period, the recorded
// ones that will drain) out of its status.
func (r *Balancer) handedTo(svc *corev1.Service, b *backend.Member, targets []*backend.Member, drain time.Duration) *corev1.Service {
	mem, ok := r.st.ShownOf(svc.UID)
	if !ok || len(svc.Status.LoadBalancer.Ingress) == 0 {
		return svc
	}
	draining := r.drainingOf(svc)
	rec := r.recordOf(svc)
	others := map[string]bool{}
	for name, addrs := range mem {
		_, drains := draining[name]
		keeps := slices.ContainsFunc(targets, func(t *backend.Member) bool { return t.Name == name }) || drains || (drain > 0 && rec.Has(name))
		if name == b.Name || !keeps {
			continue
		}
		for _, k := range addrs {
			others[k] = true
		}
	}
	for _, k := range mem[b.Name] {
		delete(others, k) // an address both report stays
	}
	if len(others) == 0 {
		return svc
	}
	out := svc.DeepCopy()
	out.Status.LoadBalancer.Ingress = slices.DeleteFunc(out.Status.LoadBalancer.Ingress, func(in corev1.LoadBalancerIngress) bool {
		return others[svcstate.IngressKey(in)]
	})
	return out
}

// rememberShown keeps, per target, the addresses its answer gave.
func (r *Balancer) rememberShown(uid types.UID, targets []*backend.Member, answers []ensured) {
	for i, a := range answers {
		if a.err != nil || a.status == nil {
			continue
		}
		keys := make([]string, 0, len(a.status.Ingress))
		for _, in := range a.status.Ingress {
			keys = append(keys, svcstate.IngressKey(in))
		}
		r.st.SetShown(uid, targets[i].Name, keys)
	}
}

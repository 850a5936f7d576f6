package chaos

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
)

// drainSlack is how much sooner than its period a drain may end without
// a violation: the judge's clock starts when it writes the change, the
// router's when it reads it, so only an early end is ever seen.
const drainSlack = time.Second

// model is what the judge asked for: the configuration in force, its
// Services' shapes, the strangers' addresses, the Nodes it registered,
// and the drains it started.
type model struct {
	cfg Config
	// svcs are the judge's Services by name (deleted ones absent).
	svcs map[string]Shape
	// strangers are the Services another controller serves, by name.
	strangers map[string]*strangerModel
	// nodes are the registered Nodes by name, with their cloud.
	nodes map[string]string
	// drains are the drains in progress the judge expects.
	drains []drainExpect
	// abandoned are the Services whose finalizer the judge removed by hand
	// while no replica led (a leader had just been killed): what the
	// deleted Service held may be left in the clouds, as with any CCM (the
	// finalizer is what makes a CCM see the deletion), so NLBs tagged with
	// its name that its status does not show are not judged.
	abandoned map[string]bool
	// orphans are the Services whose class a reload removed while they
	// were served, with their status then: nothing of it may go while the
	// class stays removed and the Service keeps it (docs/routing.md: a
	// class removed leaves its Services' load balancers alone).
	orphans map[string]orphan
	// keys are the allow-shared-ip keys each Service carried since it was
	// created, refused the requests of an address the model predicts
	// bare metal refuses, and sharing the addresses the judge saw
	// Services share (share.go).
	keys    map[string]map[string]bool
	refused map[string]refusal
	sharing map[string]shareSeen
	// last is the step last recorded.
	last int
}

type orphan struct {
	uid     types.UID
	class   string
	ingress []string
	step    int
}

type strangerModel struct {
	addr string
	// protected: no default backend was configured since its status was
	// written, so the Service is not ours and its status must stay.
	protected bool
}

// drainExpect is a load balancer that must keep serving until notBefore:
// the Service moved off its backend with a drain period.
type drainExpect struct {
	svc, backend string
	uid          types.UID
	notBefore    time.Time
	step         int
}

func newModel() *model { return newModelFor(Features{}) }

func newModelFor(f Features) *model {
	m := &model{cfg: f.initialConfig(), svcs: map[string]Shape{}, strangers: map[string]*strangerModel{}, nodes: map[string]string{}, abandoned: map[string]bool{}, orphans: map[string]orphan{},
		keys: map[string]map[string]bool{}, refused: map[string]refusal{}, sharing: map[string]shareSeen{}}
	maps.Copy(m.nodes, baseNodes)
	return m
}

// snapshot is one look at the cluster and the clouds.
type snapshot struct {
	at    time.Time
	svcs  map[string]*corev1.Service
	nodes map[string]*corev1.Node
	// nlbs are the NLBs by the name of the Service they are tagged for
	// (in the judge's namespace).
	nlbs map[string][]awsfake.LoadBalancerView
	// oslbs are the run's Octavia load balancers by the Service they are
	// tagged for; osErr says why the judge could not list them (Octavia
	// unreachable for it too: the os checks wait for the next look).
	oslbs map[string][]osLB
	osErr error
}

func (w *World) snapshot(ctx context.Context) (*snapshot, error) {
	s := &snapshot{at: time.Now(), svcs: map[string]*corev1.Service{}, nodes: map[string]*corev1.Node{}, nlbs: map[string][]awsfake.LoadBalancerView{}}
	svcs, err := w.c.CoreV1().Services(serviceNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	for i := range svcs.Items {
		s.svcs[svcs.Items[i].Name] = &svcs.Items[i]
	}
	nodes, err := w.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		s.nodes[nodes.Items[i].Name] = &nodes.Items[i]
	}
	for _, lb := range w.fake.LoadBalancers() {
		name := strings.TrimPrefix(lb.Tags["kubernetes.io/service-name"], serviceNS+"/")
		s.nlbs[name] = append(s.nlbs[name], lb)
	}
	if w.os != nil {
		if s.oslbs, s.osErr = w.os.lbs(ctx); s.osErr != nil {
			w.logf("  listing Octavia's load balancers: %v", s.osErr)
		}
	}
	return s, nil
}

// ips are the addresses in the Service's status.
func ips(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// holds reports whether backend b serves the Service name in s: an NLB
// tagged for it, or one of the status's addresses in b's pool under cfg.
func (s *snapshot) holds(cfg Config, name, b string) bool {
	switch b {
	case "aws":
		return len(s.nlbs[name]) > 0
	case "os":
		return len(s.oslbs[name]) > 0 || s.osErr != nil
	}
	svc := s.svcs[name]
	if svc == nil {
		return false
	}
	return slices.ContainsFunc(ips(svc), cfg.metalPool(b).Contains)
}

// record updates the model with op, about to be applied at step i; s is
// the world just before.
func (m *model) record(op Op, s *snapshot, i int) {
	m.last = i
	m.recordShare(op, s, i)
	switch op.Kind {
	case SvcApply:
		if o, ok := m.orphans[op.Name]; ok && (op.Shape.Class != o.class || op.Shape.Type != serviceTypeLB) {
			delete(m.orphans, op.Name)
		}
		old, had := m.svcs[op.Name]
		m.svcs[op.Name] = *op.Shape
		if had {
			m.moved(op.Name, old, *op.Shape, m.cfg, m.cfg, s, i)
		}
	case SvcDelete, SvcRecreate:
		delete(m.orphans, op.Name)
		delete(m.strangers, op.Name)
		delete(m.svcs, op.Name)
		m.cancel(op.Name, func(drainExpect) bool { return true })
		if op.Kind == SvcRecreate {
			m.svcs[op.Name] = *op.Shape
		}
	case StrangerApply:
		m.strangers[op.Name] = &strangerModel{addr: op.Addr, protected: m.cfg.Default == ""}
	case NodeJoin:
		m.nodes[op.Name] = op.Cloud
	case NodeLeave:
		delete(m.nodes, op.Name)
	case Reload:
		m.reload(*op.Config, s, i)
	}
}

func (m *model) reload(next Config, s *snapshot, i int) {
	prev := m.cfg
	m.cfg = next
	for name, o := range m.orphans {
		if _, ok := next.class(o.class); ok {
			delete(m.orphans, name)
		}
	}
	for name, shape := range m.svcs {
		_, was := prev.class(shape.Class)
		_, is := next.class(shape.Class)
		svc := s.svcs[name]
		if shape.Class == "" || shape.Type != serviceTypeLB || !was || is || svc == nil || svc.DeletionTimestamp != nil || len(ingress(svc)) == 0 {
			continue
		}
		m.orphans[name] = orphan{uid: svc.UID, class: shape.Class, ingress: ingress(svc), step: i}
	}
	for name, shape := range m.svcs {
		m.moved(name, shape, shape, prev, next, s, i)
	}
	// A drain off a backend removed, or whose pool changed, is not judged.
	for _, b := range []string{"metal", "metal2"} {
		if prev.metalPool(b) != next.metalPool(b) || prev.configured(b) != next.configured(b) {
			m.cancel("", func(e drainExpect) bool { return e.backend == b })
		}
	}
	if next.Default != "" {
		for _, st := range m.strangers {
			st.protected = false
		}
	}
}

// moved records the drains a change of the Service name (from shape a
// under prev to shape b under next) starts, and adjusts those in progress.
func (m *model) moved(name string, a, b Shape, prev, next Config, s *snapshot, i int) {
	svc := s.svcs[name]
	before, _ := prev.wanted(a)
	after, known := next.wanted(b)
	period := next.drainOf(b)
	// Leaving us (no target, another type or class, through ClusterIP)
	// retires at once: no drain.
	if svc == nil || svc.DeletionTimestamp != nil || len(after) == 0 || !known || a.Class != b.Class || a.Type != b.Type {
		m.cancel(name, func(drainExpect) bool { return true })
		return
	}
	// Back in the list: its drain ends. A shorter period now: the router
	// may not have started the drain yet, and will start it with this one.
	m.cancel(name, func(e drainExpect) bool { return slices.Contains(after, e.backend) })
	for j := range m.drains {
		if e := &m.drains[j]; e.svc == name {
			e.notBefore = minTime(e.notBefore, s.at.Add(period-drainSlack))
		}
	}
	if period <= drainSlack {
		return
	}
	for _, gone := range before {
		// A backend a reload removed drains nothing the judge can see: its
		// load balancer cannot be reached, and what it left is not judged
		// (docs/routing.md, "the write-ahead record"; chaos seed
		// 989441631: a Service on metal,metal2 after metal2 was removed,
		// moved to aws with a 6 s drain, kept metal's address and dropped
		// metal2's).
		if !prev.configured(gone) || !next.configured(gone) {
			continue
		}
		if !slices.Contains(after, gone) && s.holds(prev, name, gone) {
			m.cancel(name, func(e drainExpect) bool { return e.backend == gone })
			m.drains = append(m.drains, drainExpect{svc: name, backend: gone, uid: svc.UID, notBefore: s.at.Add(period - drainSlack), step: i})
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// cancel forgets the drains of the Service name ("" for any) that drop
// says to.
func (m *model) cancel(name string, drop func(drainExpect) bool) {
	m.drains = slices.DeleteFunc(m.drains, func(e drainExpect) bool { return (name == "" || e.svc == name) && drop(e) })
}

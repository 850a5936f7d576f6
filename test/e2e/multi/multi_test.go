package multi

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// isMetal reports whether addr is from the bare-metal pool.
func isMetal(addr string) bool {
	ip, err := netip.ParseAddr(addr)
	return err == nil && netip.MustParsePrefix(metalPool).Contains(ip)
}

// isNLB reports whether addr is an NLB's DNS name.
func isNLB(addr string) bool { return strings.Contains(addr, ".elb.") }

// TestServedByTwoClouds: a Service annotated metal,aws is served by both:
// its status lists the bare-metal address then the NLB's name; bare metal
// holds one address, AWS one NLB targeting its instances and the
// bare-metal node it can reach (not the one with a public address only). With AWS refusing every call, an edit keeps both
// addresses (a LoadBalancerBackendFailed event); the Service's deletion
// releases bare metal but waits for AWS, and once AWS answers nothing is
// left in either cloud.
func TestServedByTwoClouds(t *testing.T) {
	e := newEnv(t)
	ccm := e.startCCM("multi")
	ctx := e.ctx()
	svc := framework.NewLoadBalancerService(ns, "both", framework.WithPort("http", 80, corev1.ProtocolTCP),
		framework.WithAnnotation(backendAnn, "metal,aws"))
	if _, err := framework.CreateService(ctx, e.cp.Client, svc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "a metal address then an NLB in the status", framework.ServiceMatches(e.cp.Client, ns, "both", func(s *corev1.Service) (bool, string) {
		a := addresses(s)
		return len(a) == 2 && isMetal(a[0]) && isNLB(a[1]), fmt.Sprintf("status %v", a)
	}))
	s := e.service(ctx, "both")
	if s.Annotations[recordAnn] != "aws,metal" || s.Annotations[servedAnn] != "metal,aws" {
		t.Errorf("record %q, served-by %q; want aws,metal and metal,aws", s.Annotations[recordAnn], s.Annotations[servedAnn])
	}
	if n := e.nlbs(); n != 1 {
		t.Errorf("%d NLBs, want 1", n)
	}
	framework.Eventually(t, settle, "bare metal holds one address", func(context.Context) (bool, string, error) {
		v := metric(ctx, ccm, inUseMetric)
		return v == "1", "in use " + v, nil
	})
	// Each backend gets the nodes it can target: the NLB its instances and
	// bm-1, by IP, never bm-2, whose address is public (bare metal's load
	// balancer takes no nodes).
	framework.Eventually(t, settle, "the NLB targets its instances and bm-1", func(context.Context) (bool, string, error) {
		var targets []string
		for _, tg := range e.fake.TargetGroups() {
			targets = append(targets, tg.Targets...)
		}
		has := func(prefix string) bool {
			return slices.ContainsFunc(targets, func(t string) bool { return strings.HasPrefix(t, prefix) })
		}
		if has("203.0.113.12:") {
			t.Fatalf("NLB targets %v include bm-2, which AWS cannot reach", targets)
		}
		ok := has("10.0.0.11:")
		for _, in := range e.seeded.Instances {
			ok = ok && (has(in.ID+":") || has(in.PrivateIPs[0]+":"))
		}
		return ok, fmt.Sprintf("targets %v", targets), nil
	})

	// AWS down (every key refused): an edit keeps both addresses.
	e.fake.SetAccessKeys("AKIDNOBODY")
	e.edit(ctx, "both", func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP})
	})
	framework.Eventually(t, settle, "LoadBalancerBackendFailed", framework.EventSeen(e.cp.Client, "Service", ns, "both", corev1.EventTypeWarning, "LoadBalancerBackendFailed"))
	if a := addresses(e.service(ctx, "both")); len(a) != 2 || !isMetal(a[0]) || !isNLB(a[1]) {
		t.Errorf("status with AWS down = %v, want both addresses kept", a)
	}

	// Deleted while AWS is down: bare metal lets go, the Service waits.
	if err := e.cp.Client.CoreV1().Services(ns).Delete(ctx, "both", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Bare metal's delete succeeded (it left the record); it keeps the
	// address reserved while the Service's status shows it, until the
	// Service is gone.
	framework.Eventually(t, settle, "bare metal deleted, aws still recorded", framework.ServiceMatches(e.cp.Client, ns, "both", func(s *corev1.Service) (bool, string) {
		return s.Annotations[recordAnn] == "aws", fmt.Sprintf("record %q", s.Annotations[recordAnn])
	}))
	framework.Consistently(t, 3*time.Second, "the Service kept while AWS is down", func(context.Context) (bool, string, error) {
		_, err := e.cp.Client.CoreV1().Services(ns).Get(ctx, "both", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err), nil
	})
	if n := e.nlbs(); n != 1 {
		t.Errorf("%d NLBs while AWS is down, want the 1 kept", n)
	}
	e.fake.SetAccessKeys(accessKey)
	framework.Eventually(t, settle, "the Service gone", framework.ServiceGone(e.cp.Client, ns, "both"))
	if n := e.nlbs(); n != 0 {
		t.Errorf("%d NLBs left after the delete", n)
	}
	framework.Eventually(t, settle, "no bare-metal address in use", func(context.Context) (bool, string, error) {
		v := metric(ctx, ccm, inUseMetric)
		return v == "0", "in use " + v, nil
	})
}

// TestClassOfTwoBackends: a Service of a class listing backends [aws,
// metal], served by multicloud-ccm's own controller, gets the NLB's name
// then the bare-metal address, and its deletion leaves nothing in either.
func TestClassOfTwoBackends(t *testing.T) {
	e := newEnv(t)
	ccm := e.startCCM("class")
	ctx := e.ctx()
	svc := framework.NewLoadBalancerService(ns, "classed", framework.WithPort("http", 80, corev1.ProtocolTCP), framework.WithLoadBalancerClass(bothClass))
	if _, err := framework.CreateService(ctx, e.cp.Client, svc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "an NLB then a metal address in the status", framework.ServiceMatches(e.cp.Client, ns, "classed", func(s *corev1.Service) (bool, string) {
		a := addresses(s)
		return len(a) == 2 && isNLB(a[0]) && isMetal(a[1]) && s.Annotations[servedAnn] == "aws,metal", fmt.Sprintf("status %v, served-by %q", a, s.Annotations[servedAnn])
	}))
	if n := e.nlbsOf("classed"); n != 1 {
		t.Errorf("%d NLBs, want 1", n)
	}
	if err := e.cp.Client.CoreV1().Services(ns).Delete(ctx, "classed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "the Service gone", framework.ServiceGone(e.cp.Client, ns, "classed"))
	if n := e.nlbsOf("classed"); n != 0 {
		t.Errorf("%d NLBs left after the delete", n)
	}
	framework.Eventually(t, settle, "no bare-metal address in use", func(context.Context) (bool, string, error) {
		v := metric(ctx, ccm, inUseMetric)
		return v == "0", "in use " + v, nil
	})
}

// drainPeriod is the moves' drain.
const drainPeriod = 20 * time.Second

// move describes one move under test.
type move struct {
	from, to string
	// during runs in the middle of the drain (a restart, a failover); it
	// returns the CCM to read metrics from afterwards.
	during func(t *testing.T) *framework.CCM
}

// oldHeld reports whether the old cloud still holds the Service's load
// balancer: an NLB in the fake; for bare metal an address in use, or,
// after a restart or failover (the new process may not lead, or not have
// followed the statuses, yet: its in-use count is not the cloud's), the
// router's record still naming it (it drops a backend only once its delete
// succeeded). ok is false when it cannot tell (the CCM not answering).
func (e *env) oldHeld(ctx context.Context, c *framework.CCM, name, from string, s *corev1.Service, restarted bool) (held, ok bool) {
	switch {
	case from == "aws":
		return e.nlbsOf(name) > 0, true
	case restarted:
		return slices.Contains(strings.Split(s.Annotations[recordAnn], ","), from), true
	}
	v := metric(ctx, c, inUseMetric)
	return v != "0", v != ""
}

// moveWatch is what the polls of one move saw.
type moveWatch struct {
	t            *testing.T
	m            move
	isOld, isNew func(string) bool
	// announced: the old backend's load balancer is announced from the
	// status (bare metal): its address stays in it until the drain's end.
	announced bool
	// oldAddr is the old backend's address before the move.
	oldAddr        string
	left, drainEnd time.Time
	probe          string
	probeRefused   bool
}

// check checks one poll of the Service: the status is never empty; the
// drain is recorded before the old address leaves the status; the new
// address is in the status when the old leaves it; while a bare-metal
// address drains it comes after the new one and external-dns's target
// annotations (both prefixes) list only the new addresses, and it leaves
// the status only at the drain's end.
func (w *moveWatch) check(s *corev1.Service) {
	t := w.t
	t.Helper()
	a := addresses(s)
	if len(a) == 0 {
		t.Fatal("the status was empty during the move")
	}
	if v, ok := s.Annotations[drainingAnn]; ok && w.drainEnd.IsZero() {
		end, err := time.Parse(time.RFC3339, strings.TrimPrefix(v, w.m.from+"="))
		if err != nil {
			t.Fatalf("draining record %s=%q: %v", drainingAnn, v, err)
		}
		w.drainEnd = end
	}
	oldShown := slices.ContainsFunc(a, w.isOld)
	_, draining := s.Annotations[drainingAnn]
	if w.announced && draining && oldShown {
		w.checkSteered(s, a)
	}
	if oldShown || !w.left.IsZero() {
		return
	}
	w.left = time.Now()
	if !slices.ContainsFunc(a, w.isNew) {
		t.Fatalf("the old address left the status before the new one was in it: %v", a)
	}
	if w.drainEnd.IsZero() {
		t.Fatalf("old address out of the status without the drain recorded: %s=%q", drainingAnn, s.Annotations[drainingAnn])
	}
	if w.announced && w.left.Before(w.drainEnd) {
		t.Fatalf("the bare-metal address left the status %v before the drain's end %s", w.drainEnd.Sub(w.left), w.drainEnd.Format(time.RFC3339))
	}
}

// checkSteered checks a Service whose bare-metal address drains: the new
// addresses first, then the old; DNS pointed at the new ones only.
func (w *moveWatch) checkSteered(s *corev1.Service, a []string) {
	t := w.t
	t.Helper()
	if len(a) > 1 && (!w.isNew(a[0]) || !w.isOld(a[len(a)-1])) {
		t.Fatalf("status during the drain %v, want the new address, then the draining one", a)
	}
	target := s.Annotations[dnsTargetAnn]
	if target == "" || s.Annotations[dnsTargetGAAnn] != target || s.Annotations[dnsMarkAnn] != target {
		t.Fatalf("external-dns targets during the drain %q, %q (mark %q), want the new addresses in both", target, s.Annotations[dnsTargetGAAnn], s.Annotations[dnsMarkAnn])
	}
	for _, v := range strings.Split(target, ",") {
		if !w.isNew(v) {
			t.Fatalf("external-dns target during the drain %q lists %q, not a new address", target, v)
		}
	}
}

// checkProbe checks the Service that asks for the draining bare-metal
// address after a restart or failover: it never gets it before the
// drain's end.
func (w *moveWatch) checkProbe(ctx context.Context, e *env) {
	if w.probe == "" {
		return
	}
	p := e.service(ctx, w.probe)
	if slices.Contains(addresses(p), w.oldAddr) && time.Now().Before(w.drainEnd) {
		w.t.Fatalf("the draining address %s was handed to Service %s before the drain's end", w.oldAddr, w.probe)
	}
	if !w.probeRefused {
		ok, _, _ := framework.EventSeen(e.cp.Client, "Service", ns, w.probe, corev1.EventTypeWarning, "LoadBalancerIPInUse")(ctx)
		w.probeRefused = ok && time.Now().Before(w.drainEnd)
	}
}

// runMove creates a Service in m.from with a 20 s drain, moves it to m.to
// and polls every 100 ms (see moveWatch.check): the status is never empty;
// the new address is in the status when the old leaves it; the old load
// balancer is deleted only after the old address left the status and
// after the drain's end recorded on the Service; a bare-metal address
// stays in the status until the drain's end, external-dns steered to the
// new address, and after a restart or failover a Service asking for it is
// refused until then; nothing is left in the old cloud, nor any target
// annotation; the events say each step.
func runMove(t *testing.T, e *env, ccm *framework.CCM, name string, m move) {
	ctx := e.ctx()
	kinds := map[string]func(string) bool{"metal": isMetal, "aws": isNLB, "os": func(a string) bool { return !isMetal(a) && !isNLB(a) }}
	w := &moveWatch{t: t, m: m, isOld: kinds[m.from], isNew: kinds[m.to], announced: m.from == "metal"}
	settle := settle
	if m.to == "os" {
		settle = 3 * settle // Octavia: create, ACTIVE, converge
	}
	svc := framework.NewLoadBalancerService(ns, name, framework.WithPort("http", 80, corev1.ProtocolTCP),
		framework.WithAnnotation(backendAnn, m.from), framework.WithAnnotation(drainAnn, drainPeriod.String()))
	if _, err := framework.CreateService(ctx, e.cp.Client, svc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "served by "+m.from, framework.ServiceMatches(e.cp.Client, ns, name, func(s *corev1.Service) (bool, string) {
		a := addresses(s)
		return len(a) == 1 && w.isOld(a[0]), fmt.Sprintf("status %v", a)
	}))
	w.oldAddr = addresses(e.service(ctx, name))[0]
	framework.Eventually(t, settle, m.from+" holds it", func(context.Context) (bool, string, error) {
		held, ok := e.oldHeld(ctx, ccm, name, m.from, nil, false)
		return held && ok, "", nil
	})
	e.edit(ctx, name, func(s *corev1.Service) { s.Annotations[backendAnn] = m.to })
	moved := time.Now()

	var deleted time.Time
	interrupted := m.during == nil
	for deleted.IsZero() {
		if time.Since(moved) > drainPeriod+2*settle {
			t.Fatalf("the old load balancer was not deleted %v after the move", time.Since(moved))
		}
		s := e.service(ctx, name)
		w.check(s)
		w.checkProbe(ctx, e)
		if !interrupted && !w.drainEnd.IsZero() && time.Until(w.drainEnd) < drainPeriod*2/3 {
			ccm = m.during(t)
			interrupted = true
			if w.announced {
				w.probe = "probe-" + name
				p := framework.NewLoadBalancerService(ns, w.probe, framework.WithAnnotation(backendAnn, "metal"),
					framework.WithAnnotation("multicloud-ccm.io/load-balancer-ips", w.oldAddr))
				if _, err := framework.CreateService(ctx, e.cp.Client, p); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		if held, ok := e.oldHeld(ctx, ccm, name, m.from, s, m.during != nil); ok && !held {
			// s was read before the check, and the address may have left
			// the status and been released in between (1-107 ms apart):
			// the status read after the check is the one that must no
			// longer show it.
			after := e.service(ctx, name)
			w.check(after)
			if w.left.IsZero() {
				t.Fatalf("the old load balancer was deleted while its address %v was in the status", addresses(after))
			}
			deleted = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("old address left the status %v after the move; old load balancer deleted %v after that (drain %v, recorded end %s)",
		w.left.Sub(moved).Round(time.Millisecond), deleted.Sub(w.left).Round(time.Millisecond), drainPeriod, w.drainEnd.Format(time.RFC3339))
	// Polls may see the status late: the drain is checked against its
	// recorded end and the edit, which came before it began.
	if deleted.Before(w.drainEnd) || deleted.Sub(moved) < drainPeriod {
		t.Errorf("the old load balancer was deleted %v after the move (%v after its address was seen leaving the status), before the drain's end %s",
			deleted.Sub(moved), deleted.Sub(w.left), w.drainEnd)
	}
	framework.Eventually(t, settle, "the record names only "+m.to+", no drain, no target annotation left", framework.ServiceMatches(e.cp.Client, ns, name, func(s *corev1.Service) (bool, string) {
		_, draining := s.Annotations[drainingAnn]
		dns := s.Annotations[dnsTargetAnn] + s.Annotations[dnsTargetGAAnn] + s.Annotations[dnsMarkAnn]
		a := addresses(s)
		return s.Annotations[recordAnn] == m.to && !draining && dns == "" && len(a) == 1 && w.isNew(a[0]),
			fmt.Sprintf("record %q, draining %v, targets %q, status %v", s.Annotations[recordAnn], draining, dns, a)
	}))
	for _, reason := range []string{"LoadBalancerDraining", "LoadBalancerDrained"} {
		framework.Eventually(t, settle, reason, framework.EventSeen(e.cp.Client, "Service", ns, name, corev1.EventTypeNormal, reason))
	}
	if want := map[bool]int{true: 1, false: 0}[m.to == "aws"]; e.nlbsOf(name) != want {
		t.Errorf("%d NLBs after the move from %s to %s, want %d", e.nlbsOf(name), m.from, m.to, want)
	}
	if m.to == "os" && e.octavia() != 1 {
		t.Errorf("%d Octavia load balancers after the move, want 1", e.octavia())
	}
	w.checkReleased(ctx, e, settle)
	for _, n := range []string{name, w.probe} {
		if n == "" {
			continue
		}
		if err := e.cp.Client.CoreV1().Services(ns).Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		framework.Eventually(t, settle, n+" deleted", framework.ServiceGone(e.cp.Client, ns, n))
	}
	if n := e.nlbsOf(name); n != 0 {
		t.Errorf("%d NLBs after the delete", n)
	}
}

// checkReleased checks, after a restart or failover during a bare-metal
// drain, that the Service asking for the draining address was refused it
// while the drain lasted and gets it once it ended.
func (w *moveWatch) checkReleased(ctx context.Context, e *env, settle time.Duration) {
	if w.probe == "" {
		return
	}
	t := w.t
	if !w.probeRefused {
		t.Errorf("Service %s asking for the draining address %s was not seen refused (LoadBalancerIPInUse) before the drain's end", w.probe, w.oldAddr)
	}
	e.edit(ctx, w.probe, func(s *corev1.Service) { s.Annotations["e2e-retry"] = "now" })
	framework.Eventually(t, settle, w.probe+" given the released address", framework.ServiceMatches(e.cp.Client, ns, w.probe, func(s *corev1.Service) (bool, string) {
		a := addresses(s)
		return slices.Equal(a, []string{w.oldAddr}), fmt.Sprintf("status %v", a)
	}))
}

// TestMoveDrains moves a Service from bare metal to AWS and back with a
// 20 s drain (see runMove).
func TestMoveDrains(t *testing.T) {
	e := newEnv(t)
	ccm := e.startCCM("move")
	t.Run("metal to aws", func(t *testing.T) { runMove(t, e, ccm, "m2a", move{from: "metal", to: "aws"}) })
	t.Run("aws to metal", func(t *testing.T) { runMove(t, e, ccm, "a2m", move{from: "aws", to: "metal"}) })
}

// TestMoveDrainSurvivesRestart: the same moves, with the CCM restarted a
// third into the drain: the drain is neither cut short nor forgotten (it
// ends on time, with no further edit of the Service). Bare metal rebuilds
// its allocations from the Services' status at start-up, so a draining
// bare-metal address is not held by the restarted process: the metal to
// aws case checks the router's record (metal leaves it only at the drain's
// end), the aws to metal case that the NLB outlives the restart until the
// drain's end.
func TestMoveDrainSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	ccm := e.startCCM("restart")
	restart := func(t *testing.T) *framework.CCM {
		t.Log("restarting the CCM mid-drain")
		if err := ccm.Restart(e.ctx()); err != nil {
			t.Fatal(err)
		}
		return ccm
	}
	t.Run("metal to aws", func(t *testing.T) { runMove(t, e, ccm, "r-m2a", move{from: "metal", to: "aws", during: restart}) })
	t.Run("aws to metal", func(t *testing.T) { runMove(t, e, ccm, "r-a2m", move{from: "aws", to: "metal", during: restart}) })
}

// TestMoveDrainSurvivesFailover: the same moves with two CCMs under
// leader election, the leader killed (SIGKILL) a third into the drain: the
// new leader ends the drain on time. Each direction has its own pair.
func TestMoveDrainSurvivesFailover(t *testing.T) {
	for _, m := range []move{{from: "metal", to: "aws"}, {from: "aws", to: "metal"}} {
		t.Run(m.from+" to "+m.to, func(t *testing.T) {
			e := newEnv(t)
			le := []string{"--leader-elect=true", "--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s",
				"--leader-elect-retry-period=1s", "--leader-elect-resource-name=mccm-multi"}
			leader := e.startCCM("leader", le...)
			framework.Eventually(t, settle, "the first CCM leads", func(ctx context.Context) (bool, string, error) {
				h, err := framework.LeaseHolder(ctx, e.cp.Client, "kube-system", "mccm-multi")
				return err == nil && h != "", fmt.Sprintf("holder %q, %v", h, err), nil
			})
			follower := e.startCCM("follower", le...)
			m.during = func(t *testing.T) *framework.CCM {
				t.Log("killing the leader mid-drain")
				if err := syscall.Kill(leader.PID(), syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				<-leader.Done()
				return follower
			}
			runMove(t, e, leader, "f-"+m.from, m)
		})
	}
}

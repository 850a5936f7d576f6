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
// after a restart or failover (the new process rebuilt its allocations
// from the statuses, which no longer show the draining address), the
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

// runMove creates a Service in m.from with a 20 s drain, moves it to m.to
// and polls every 100 ms: the status is never empty; the new address is in
// the status when the old leaves it; the old load balancer is deleted only
// after the old address left the status and after the drain's end recorded
// on the Service; nothing is left in the old cloud; the events say each
// step.
func runMove(t *testing.T, e *env, ccm *framework.CCM, name string, m move) {
	ctx := e.ctx()
	kinds := map[string]func(string) bool{"metal": isMetal, "aws": isNLB, "os": func(a string) bool { return !isMetal(a) && !isNLB(a) }}
	isOld, isNew := kinds[m.from], kinds[m.to]
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
		return len(a) == 1 && isOld(a[0]), fmt.Sprintf("status %v", a)
	}))
	framework.Eventually(t, settle, m.from+" holds it", func(context.Context) (bool, string, error) {
		held, ok := e.oldHeld(ctx, ccm, name, m.from, nil, false)
		return held && ok, "", nil
	})
	e.edit(ctx, name, func(s *corev1.Service) { s.Annotations[backendAnn] = m.to })
	moved := time.Now()

	var left, deleted, drainEnd time.Time
	interrupted := m.during == nil
	for deleted.IsZero() {
		if time.Since(moved) > drainPeriod+2*settle {
			t.Fatalf("the old load balancer was not deleted %v after the move", time.Since(moved))
		}
		s, err := e.cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a := addresses(s)
		if len(a) == 0 {
			t.Fatal("the status was empty during the move")
		}
		oldShown := slices.ContainsFunc(a, isOld)
		if !oldShown && left.IsZero() {
			left = time.Now()
			if !slices.ContainsFunc(a, isNew) {
				t.Fatalf("the old address left the status before the new one was in it: %v", a)
			}
			end, err := time.Parse(time.RFC3339, strings.TrimPrefix(s.Annotations[drainingAnn], m.from+"="))
			if err != nil {
				t.Fatalf("old address out of the status without the drain recorded: %s=%q", drainingAnn, s.Annotations[drainingAnn])
			}
			drainEnd = end
		}
		if !left.IsZero() && !interrupted && time.Since(left) > drainPeriod/3 {
			ccm = m.during(t)
			interrupted = true
			continue
		}
		if held, ok := e.oldHeld(ctx, ccm, name, m.from, s, m.during != nil); ok && !held {
			if left.IsZero() {
				t.Fatalf("the old load balancer was deleted while its address %v was in the status", a)
			}
			deleted = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("old address left the status %v after the move; old load balancer deleted %v after that (drain %v, recorded end %s)",
		left.Sub(moved).Round(time.Millisecond), deleted.Sub(left).Round(time.Millisecond), drainPeriod, drainEnd.Format(time.RFC3339))
	// Polls may see the status late: the drain is checked against its
	// recorded end and the edit, which came before it began.
	if deleted.Before(drainEnd) || deleted.Sub(moved) < drainPeriod {
		t.Errorf("the old load balancer was deleted %v after the move (%v after its address was seen leaving the status), before the drain's end %s",
			deleted.Sub(moved), deleted.Sub(left), drainEnd)
	}
	framework.Eventually(t, settle, "the record names only "+m.to+", no drain left", framework.ServiceMatches(e.cp.Client, ns, name, func(s *corev1.Service) (bool, string) {
		_, draining := s.Annotations[drainingAnn]
		a := addresses(s)
		return s.Annotations[recordAnn] == m.to && !draining && len(a) == 1 && isNew(a[0]), fmt.Sprintf("record %q, draining %v, status %v", s.Annotations[recordAnn], draining, a)
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
	if err := e.cp.Client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "deleted", framework.ServiceGone(e.cp.Client, ns, name))
	if n := e.nlbsOf(name); n != 0 {
		t.Errorf("%d NLBs after the delete", n)
	}
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

package plan_test

import (
	"fmt"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
)

// TestPlanPrintsTheRouterDecision: what the plan says becomes of a
// Service is the router's decision (router.Decide), in the cases the call
// log could only guess (issue 40, defect 9):
//   - left by us (its default removed from the config) while aws holds
//     its NLB: no backend of ours serves it, and the NLB the router
//     deletes first is listed and counted;
//   - its record naming a backend the config no longer has: served by its
//     target, not refused; the leftover deletes nothing.
func TestPlanPrintsTheRouterDecision(t *testing.T) {
	w := newWorld(t)
	left := lbService("left", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws"))
	stale := lbService("stale", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws"))
	w.ensureForReal(t, left, stale)
	// As the CCM leaves them: the record and who serves.
	left.Annotations["multicloud-ccm.io/load-balancer-backends"] = "aws"
	left.Annotations["multicloud-ccm.io/load-balancer-served-by"] = "aws"
	delete(left.Annotations, "multicloud-ccm.io/load-balancer-backend")
	stale.Annotations["multicloud-ccm.io/load-balancer-backends"] = "aws,gone"
	stale.Annotations["multicloud-ccm.io/load-balancer-served-by"] = "aws"

	cfg := *w.cfg
	cfg.LoadBalancer.DefaultBackend = ""
	rep, got := w.planOf(t, &cfg, left, stale)

	l := got["left"]
	deletes := 0
	for _, in := range l.Changes {
		if in.Kind == backends.IntentDelete {
			deletes++
		}
	}
	if l.Outcome != plan.LBElsewhere || fmt.Sprint(l.DeletedFrom) != "[aws]" || deletes == 0 {
		t.Errorf("left: %s, deleted from %v, %d deletes; want %s, the NLB in aws deleted", l.Outcome, l.DeletedFrom, deletes, plan.LBElsewhere)
	}
	s := got["stale"]
	if s.Outcome == plan.LBRefused || s.Backend != "aws" || len(s.DeletedFrom)+len(s.DrainedFrom) != 0 || s.NewAddress == "" {
		t.Errorf("stale: %s by %q (error %q), deleted from %v, drained from %v, address %q; want served by aws, nothing deleted",
			s.Outcome, s.Backend, s.Error, s.DeletedFrom, s.DrainedFrom, s.NewAddress)
	}
	if rep.Summary.LBDeleted != 1 {
		t.Errorf("summary %q: want 1 deleted", rep.Summary)
	}
}

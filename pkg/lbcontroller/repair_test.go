package lbcontroller

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/testutil"
)

// TestRepairPassPacedAndResumed: a drift-repair pass spreads its Services
// over half the resync period (with a period of an hour, 6 Services are
// 5 minutes apart: only the first is checked at once); a pass unfinished
// when the next begins is a RepairPassUnfinished Warning (on the first
// Service it did not reach) and a metric, and the next pass begins with
// the Services it left, not from the top again.
func TestRepairPassPacedAndResumed(t *testing.T) {
	var objs []runtime.Object
	for i := range 6 {
		objs = append(objs, service(fmt.Sprintf("web-%d", i), ptrTo(ourClass)))
	}
	e := startEnv(t, envOptions{doc: cloudConfig, resync: time.Hour}, objs...)
	for i := range 6 {
		eventually(t, "the Service's address", addressed(e, t, fmt.Sprintf("web-%d", i)))
	}
	eventually(t, "the start-up syncs done", func() error {
		e.ctrl.mu.Lock()
		defer e.ctrl.mu.Unlock()
		if e.ctrl.pass != nil {
			return errors.New("a pass in progress")
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond)
	ensures := e.cloud.ensures.Load()
	unfinished, _ := testutil.GetCounterMetricValue(repairUnfinished)

	e.ctrl.startRepairPass(e.ctx)
	eventually(t, "the pass's first Service checked", func() error {
		if got := e.cloud.ensures.Load(); got != ensures+1 {
			return fmt.Errorf("%d ensures, want %d", got, ensures+1)
		}
		return nil
	})
	if got := e.cloud.lastEnsured().Name; got != "web-0" {
		t.Errorf("the pass began with %s, want web-0", got)
	}
	time.Sleep(300 * time.Millisecond)
	if got := e.cloud.ensures.Load(); got != ensures+1 {
		t.Fatalf("%d Services checked at once, want 1: the pass is not spread over its period", got-ensures)
	}

	e.ctrl.startRepairPass(e.ctx)
	eventually(t, "the next pass's first Service checked", func() error {
		if got := e.cloud.ensures.Load(); got != ensures+2 {
			return fmt.Errorf("%d ensures, want %d", got, ensures+2)
		}
		return nil
	})
	if got := e.cloud.lastEnsured().Name; got != "web-1" {
		t.Errorf("the next pass began with %s, want web-1, the first the unfinished pass did not reach", got)
	}
	eventually(t, "the unfinished pass's Warning", func() error {
		ev := hasEvent(e.events(t, "web-1"), reasonRepairUnfinished)
		if !strings.Contains(ev, "checked 1 of 6 Services") || !strings.Contains(ev, "starts with the 5 it did not reach") {
			return fmt.Errorf("events of web-1: %v", e.events(t, "web-1"))
		}
		return nil
	})
	if got, _ := testutil.GetCounterMetricValue(repairUnfinished); got != unfinished+1 {
		t.Errorf("repair_passes_unfinished_total grew by %v, want 1", got-unfinished)
	}
}

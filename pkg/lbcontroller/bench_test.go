package lbcontroller

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// BenchmarkRepairPass: one drift-repair pass over 1,000 bare-metal
// Services with nothing changed, through the controller and the router.
// It reports the API writes and events of a pass (both must be 0) and the
// pass's duration; the cloud reads of a pass are each backend's
// BenchmarkRepairPass (bare metal makes none: its state is the Services).
func BenchmarkRepairPass(b *testing.B) {
	const n = 1000
	objs := make([]runtime.Object, 0, n)
	for i := range n {
		objs = append(objs, service(fmt.Sprintf("s%04d", i), ptrTo(ourClass)))
	}
	e := startWith(b, bigPoolConfig, false, objs...)
	waitFor(b, time.Minute, "every Service addressed", func() error {
		list, err := e.client.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		done := 0
		for _, s := range list.Items {
			if ingress(&s) != "" {
				done++
			}
		}
		if done < n {
			return fmt.Errorf("%d of %d", done, n)
		}
		return nil
	})
	time.Sleep(time.Second) // the controller's own echoes
	e.client.ClearActions()
	ensures := e.cloud.ensures.Load()
	for b.Loop() {
		e.ctrl.startRepairPass(e.ctx)
		waitFor(b, time.Minute, "the pass done", func() error {
			e.ctrl.mu.Lock()
			defer e.ctrl.mu.Unlock()
			if e.ctrl.pass != nil {
				return fmt.Errorf("%d Services left", e.ctrl.pass.pending.Len()+e.ctrl.pass.inflight)
			}
			return nil
		})
	}
	b.StopTimer()
	writes, events := 0, 0
	for _, a := range e.client.Actions() {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			if a.GetResource().Resource == "events" {
				events++
			} else {
				writes++
			}
		}
	}
	b.ReportMetric(float64(e.cloud.ensures.Load()-ensures)/float64(b.N), "ensures/pass")
	b.ReportMetric(float64(writes)/float64(b.N), "api-writes/pass")
	b.ReportMetric(float64(events)/float64(b.N), "events/pass")
}

const bigPoolConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  classes: [{name: ` + ourClass + `, backend: metal}]
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools: [{name: lan, addresses: ["10.200.0.0/20"]}]
`

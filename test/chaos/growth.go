package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// The process metrics every replica exports (component-base's Go and
// process collectors).
const (
	goroutinesMetric = "go_goroutines"
	heapMetric       = "go_memstats_heap_inuse_bytes"
	rssMetric        = "process_resident_memory_bytes"
)

// The bounds of growthViolations, from the judge's clean runs
// (docs/testing.md, "Goroutines and memory"): a replica's goroutines may
// grow by goroutineSlack, its heap in use by heapSlack, from the first
// quiescence to the end of a run in the same role; more is a leak.
const (
	goroutineSlack = 150
	heapSlack      = 48 << 20
)

// procStats are one replica's goroutines and memory, and whether it led
// when they were read.
type procStats struct {
	goroutines, heap, rss int
	leader                bool
}

func (p procStats) String() string {
	return fmt.Sprintf("%d goroutines, heap in use %.1f MiB, RSS %.1f MiB", p.goroutines, mib(p.heap), mib(p.rss))
}

func mib(n int) float64 { return float64(n) / (1 << 20) }

func (w *World) procStats(ctx context.Context, r *framework.CCM) (procStats, error) {
	got, err := metrics(ctx, r, goroutinesMetric, heapMetric, rssMetric)
	if err != nil {
		return procStats{}, err
	}
	if got[goroutinesMetric] == 0 {
		return procStats{}, fmt.Errorf("%s /metrics has no %s", r.Name(), goroutinesMetric)
	}
	return procStats{goroutines: got[goroutinesMetric], heap: got[heapMetric], rss: got[rssMetric], leader: r == w.leader()}, nil
}

// baseline waits for the first quiescence, the base Nodes initialized by
// the leader, and reads every replica's goroutines and memory.
func (w *World) baseline(ctx context.Context) error {
	err := framework.WaitFor(ctx, 60*time.Second, "the base Nodes initialized", func(ctx context.Context) (bool, string, error) {
		nodes, err := w.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ready := 0
		for i := range nodes.Items {
			if _, base := baseNodes[nodes.Items[i].Name]; base && initialized(&nodes.Items[i]) {
				ready++
			}
		}
		return ready == len(baseNodes), fmt.Sprintf("%d of %d base Nodes initialized", ready, len(baseNodes)), nil
	})
	if err != nil {
		return err
	}
	w.base = map[*framework.CCM]procStats{}
	for _, r := range w.replicas {
		p, err := w.procStats(ctx, r)
		if err != nil {
			return err
		}
		w.base[r] = p
	}
	return nil
}

func initialized(n *corev1.Node) bool { return n.Spec.ProviderID != "" && !uninitialized(n) }

// growth compares, at the end of a run (quiescence reached), each replica
// that ran from the first quiescence in the same role (the leader still
// leading, the standby still standing by) with what it had then; a
// replica that took over or was started since is not compared (a new
// leader starts its controllers and informers).
func (w *World) growth(ctx context.Context) []Violation {
	var out []Violation
	for _, r := range w.replicas {
		b, ok := w.base[r]
		if exited, _ := r.Exited(); !ok || exited || w.killed[r] {
			continue
		}
		p, err := w.procStats(ctx, r)
		if err != nil {
			out = append(out, violation(vConverge, "%v", err))
			continue
		}
		role := map[bool]string{true: "leader", false: "standby"}
		w.logf("growth of %s (%s, then %s): %s at the first quiescence, %s at the end", r.Name(), role[b.leader], role[p.leader], b, p)
		if p.leader != b.leader {
			continue
		}
		v := growthViolations(r.Name(), b, p)
		if len(v) > 0 {
			w.saveGoroutines(ctx, r)
		}
		out = append(out, v...)
	}
	return out
}

// growthViolations judges one replica's growth between two readings.
func growthViolations(name string, b, p procStats) []Violation {
	var out []Violation
	if p.goroutines > b.goroutines+goroutineSlack {
		out = append(out, violation(vGrowth, "%s: %d goroutines at the end, %d at the first quiescence (bound +%d)", name, p.goroutines, b.goroutines, goroutineSlack))
	}
	if p.heap > b.heap+heapSlack {
		out = append(out, violation(vGrowth, "%s: heap in use %.1f MiB at the end, %.1f MiB at the first quiescence (bound +%.0f MiB)", name, mib(p.heap), mib(b.heap), mib(heapSlack)))
	}
	return slices.Clip(out)
}

// saveGoroutines writes the replica's goroutine profile (grouped stacks)
// into the run's folder, kept with a violation, to tell what grew.
func (w *World) saveGoroutines(ctx context.Context, r *framework.CCM) {
	code, body, err := r.Get(ctx, "/debug/pprof/goroutine?debug=1")
	if err != nil || code != 200 {
		w.logf("goroutine profile of %s: %d %v", r.Name(), code, err)
		return
	}
	path := filepath.Join(w.Dir, r.Name()+"-goroutines.txt")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		w.logf("goroutine profile of %s: %v", r.Name(), err)
		return
	}
	w.logf("goroutine profile of %s in %s", r.Name(), path)
}

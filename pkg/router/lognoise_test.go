package router

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/klog/v2"
)

// lineCounter counts the router's "Warning:" log lines per verbosity.
type lineCounter struct {
	mu      sync.Mutex
	byLevel map[int]int
}

func (c *lineCounter) logger() logr.Logger {
	return logr.New(&countingSink{c: c})
}

func (c *lineCounter) at(level int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byLevel[level]
}

// countingSink is a logr sink counting Info lines that start with
// "Warning:" at each verbosity, enabled up to V(4).
type countingSink struct{ c *lineCounter }

func (s *countingSink) Init(logr.RuntimeInfo)  {}
func (s *countingSink) Enabled(level int) bool { return level <= 4 }
func (s *countingSink) Info(level int, msg string, _ ...any) {
	if !strings.HasPrefix(msg, "Warning:") {
		return
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.byLevel[level]++
}
func (s *countingSink) Error(error, string, ...any)    {}
func (s *countingSink) WithValues(...any) logr.LogSink { return s }
func (s *countingSink) WithName(string) logr.LogSink   { return s }

// TestUnchangedNodeProblemIsLoggedOnce drives the upstream node-lifecycle
// controller over 25 unmanaged NotReady nodes under nodes.unmanaged:
// error, for many monitor rounds: each node's problem is logged once at
// the default verbosity, repeats only at V(4).
func TestUnchangedNodeProblemIsLoggedOnce(t *testing.T) {
	r := metalRouter(t, "error")
	var nodes []*corev1.Node
	for i := range 25 {
		nodes = append(nodes, newNode(fmt.Sprintf("kind-%02d", i), withProviderID(fmt.Sprintf("kind://docker/kind/kind-%02d", i)), notReady))
	}
	c := startCluster(t, r, objects(nodes)...)
	ctrl, err := nodelifecycle.NewCloudNodeLifecycleController(c.factory.Core().V1().Nodes(), c.client, r, 10*time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	lines := &lineCounter{byLevel: map[int]int{}}
	c.run(t, func(ctx context.Context) {
		ctrl.Run(klog.NewContext(ctx, lines.logger()), controllersmetrics.NewControllerManagerMetrics("test"))
	})
	eventually(t, "ten monitor rounds", func() bool { return lines.at(0)+lines.at(4) >= 10*25 })
	if n := lines.at(0); n != 25 {
		t.Errorf("%d Warning lines at the default verbosity for 25 nodes with unchanged problems over %d checks, want 25", n, lines.at(0)+lines.at(4))
	}
}

package snapshot

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// source is a fake cloud: a set of names, listed by fetch.
type source struct {
	mu    sync.Mutex
	names map[string]bool
	err   error
	calls atomic.Int64
	// gate, when set, holds each listing until it is closed.
	gate chan struct{}
}

func (s *source) fetch(ctx context.Context) (map[string]bool, error) {
	s.calls.Add(1)
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	out := make(map[string]bool, len(s.names))
	for n := range s.names {
		out[n] = true
	}
	return out, nil
}

func (s *source) set(err error, names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
	s.names = map[string]bool{}
	for _, n := range names {
		s.names[n] = true
	}
}

func newTest(t *testing.T, cfg Config) (*Cache[map[string]bool], *source, *clock) {
	t.Helper()
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg.Now = clk.Now
	if cfg.Backend == "" {
		cfg.Backend = t.Name()
	}
	src := &source{}
	src.set(nil, "a")
	return New(cfg, src.fetch), src, clk
}

func find(name string) func(map[string]bool) (string, bool) {
	return func(m map[string]bool) (string, bool) { return name, m[name] }
}

func lookup(t *testing.T, c *Cache[map[string]bool], name string) (bool, error) {
	t.Helper()
	_, found, err := Lookup(context.Background(), c, find(name))
	return found, err
}

func TestTTL(t *testing.T) {
	c, src, clk := newTest(t, Config{TTL: time.Minute, MissInterval: 10 * time.Second})
	for range 3 {
		if found, err := lookup(t, c, "a"); err != nil || !found {
			t.Fatalf("lookup a = %v, %v", found, err)
		}
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("%d listings for three hits in the TTL, want 1", n)
	}
	clk.advance(time.Minute)
	if found, err := lookup(t, c, "a"); err != nil || !found {
		t.Fatalf("lookup a = %v, %v", found, err)
	}
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("%d listings after the TTL, want 2", n)
	}
}

func TestMissInterval(t *testing.T) {
	c, src, clk := newTest(t, Config{TTL: time.Minute, MissInterval: 10 * time.Second})
	if found, err := lookup(t, c, "b"); err != nil || found {
		t.Fatalf("lookup b = %v, %v, want a miss", found, err)
	}
	clk.advance(5 * time.Second)
	src.set(nil, "a", "b")
	if found, _ := lookup(t, c, "b"); found {
		t.Fatal("b found within the miss interval: the cache listed again")
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("%d listings within the miss interval, want 1", n)
	}
	clk.advance(5 * time.Second)
	if found, err := lookup(t, c, "b"); err != nil || !found {
		t.Fatalf("lookup b after the miss interval = %v, %v, want found", found, err)
	}
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("%d listings, want 2", n)
	}
	// A hit does not list, however old the snapshot within the TTL.
	clk.advance(30 * time.Second)
	if found, _ := lookup(t, c, "a"); !found || src.calls.Load() != 2 {
		t.Fatalf("hit = %v after %d listings, want a hit without listing", found, src.calls.Load())
	}
}

func TestMissIntervalCappedAtTTL(t *testing.T) {
	c, _, _ := newTest(t, Config{TTL: time.Second, MissInterval: time.Minute})
	if got := c.Config().MissInterval; got != time.Second {
		t.Fatalf("miss interval %s, want the TTL", got)
	}
}

func TestFailureBackoff(t *testing.T) {
	c, src, clk := newTest(t, Config{TTL: time.Minute, MissInterval: 10 * time.Second, FailureBackoff: 5 * time.Second})
	down := errors.New("cloud down")
	src.set(down, "a")
	for range 5 {
		if _, err := lookup(t, c, "a"); !errors.Is(err, down) {
			t.Fatalf("lookup error %v, want %v", err, down)
		}
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("%d listings for five lookups within the backoff, want 1", n)
	}
	clk.advance(5 * time.Second)
	src.set(nil, "a")
	if found, err := lookup(t, c, "a"); err != nil || !found {
		t.Fatalf("lookup after the backoff = %v, %v", found, err)
	}
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("%d listings, want 2", n)
	}
	// ForgetFailure ends the backoff at once.
	src.set(down, "a")
	clk.advance(time.Minute)
	if _, err := lookup(t, c, "a"); !errors.Is(err, down) {
		t.Fatalf("lookup error %v, want %v", err, down)
	}
	src.set(nil, "a")
	c.ForgetFailure()
	if found, err := lookup(t, c, "a"); err != nil || !found {
		t.Fatalf("lookup after ForgetFailure = %v, %v", found, err)
	}
	// A success forgets the failure.
	c.Invalidate()
	if _, err := lookup(t, c, "a"); err != nil {
		t.Fatal(err)
	}
}

func TestNoBackoff(t *testing.T) {
	c, src, _ := newTest(t, Config{TTL: time.Minute})
	src.set(errors.New("down"))
	for range 3 {
		if _, err := lookup(t, c, "a"); err == nil {
			t.Fatal("no error")
		}
	}
	if n := src.calls.Load(); n != 3 {
		t.Fatalf("%d listings without a backoff, want 3", n)
	}
}

func TestConcurrentListingsMerge(t *testing.T) {
	c, src, _ := newTest(t, Config{TTL: time.Minute})
	src.gate = make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			found, err := lookup(t, c, "a")
			if err == nil && !found {
				err = errors.New("a not found")
			}
			errs <- err
		})
	}
	for src.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(src.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("%d listings for 50 concurrent lookups, want 1", n)
	}
}

func TestCallerCancellationDoesNotCancelTheListing(t *testing.T) {
	c, src, _ := newTest(t, Config{TTL: time.Minute, ListTimeout: time.Minute})
	src.gate = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx)
		done <- err
	}()
	for src.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v", err)
	}
	// A second caller joins the listing still under way, which succeeds.
	got := make(chan error, 1)
	go func() {
		_, err := c.Get(context.Background())
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	close(src.gate)
	if err := <-got; err != nil {
		t.Fatalf("the caller that stayed got %v", err)
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("%d listings, want 1: the cancelled caller's listing carried on", n)
	}
	if _, _, ok := c.Current(); !ok {
		t.Fatal("no snapshot kept")
	}
}

func TestListTimeout(t *testing.T) {
	c, src, _ := newTest(t, Config{TTL: time.Minute, ListTimeout: 20 * time.Millisecond})
	src.gate = make(chan struct{}) // never opened
	if _, err := c.Get(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the list timeout", err)
	}
}

func TestSinceJoinsOnlyListingsBegunAfter(t *testing.T) {
	c, src, clk := newTest(t, Config{TTL: time.Hour})
	if _, err := c.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Second)
	if _, err := c.Since(context.Background(), clk.Now()); err != nil {
		t.Fatal(err)
	}
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("%d listings, want 2: the cached snapshot began before notBefore", n)
	}
	if _, fetched, _ := c.Current(); !fetched.Equal(clk.Now()) {
		t.Fatalf("snapshot from %s, want %s", fetched, clk.Now())
	}
}

func TestInvalidate(t *testing.T) {
	c, src, _ := newTest(t, Config{TTL: time.Hour})
	_, _ = c.Get(context.Background())
	c.Invalidate()
	if _, _, ok := c.Current(); ok {
		t.Fatal("snapshot kept after Invalidate")
	}
	_, _ = c.Get(context.Background())
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("%d listings, want 2", n)
	}
}

func TestMetrics(t *testing.T) {
	c, src, clk := newTest(t, Config{TTL: time.Minute, MissInterval: time.Second, FailureBackoff: time.Second})
	_, _ = lookup(t, c, "a") // list ok, hit
	_, _ = lookup(t, c, "b") // miss (no relisting: the snapshot is new)
	clk.advance(2 * time.Second)
	src.set(errors.New("down"))
	_, _ = lookup(t, c, "b") // list error
	_, _ = lookup(t, c, "b") // backoff
	c.RecordLookup(true)     // hit
	c.RecordLookup(false)    // miss
	m := c.metrics
	for name, want := range map[string]struct {
		got  func() (float64, error)
		want float64
	}{
		"hits":    {func() (float64, error) { return testutil.GetCounterMetricValue(m.hits) }, 2},
		"misses":  {func() (float64, error) { return testutil.GetCounterMetricValue(m.misses) }, 2},
		"listOK":  {func() (float64, error) { return testutil.GetCounterMetricValue(m.listOK) }, 1},
		"listErr": {func() (float64, error) { return testutil.GetCounterMetricValue(m.listFailed) }, 1},
		"backoff": {func() (float64, error) { return testutil.GetCounterMetricValue(m.backedOff) }, 1},
	} {
		got, err := want.got()
		if err != nil || got != want.want {
			t.Errorf("%s = %v, %v; want %v", name, got, err, want.want)
		}
	}
	if n, err := testutil.GetHistogramMetricCount(m.duration); err != nil || n != 2 {
		t.Errorf("list durations observed %d, %v; want 2", n, err)
	}
}

// TestMetricsRegistered: the metrics are on the legacy registry, which the
// CCM serves at /metrics, labelled by backend.
func TestMetricsRegistered(t *testing.T) {
	c, _, _ := newTest(t, Config{Backend: "registered", TTL: time.Minute})
	_, _ = lookup(t, c, "a")
	got, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, "multicloud_ccm_snapshot_lists_total", map[string]string{"backend": "registered"}, "result")
	if err != nil || got["success"] != 1 {
		t.Fatalf("lists_total{backend=registered} by result = %v, %v; want success 1", got, err)
	}
	got, err = testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, "multicloud_ccm_snapshot_lookups_total", map[string]string{"backend": "registered"}, "result")
	if err != nil || got["hit"] != 1 {
		t.Fatalf("lookups_total{backend=registered} by result = %v, %v; want hit 1", got, err)
	}
}

// TestMetricsBySource: the listings of a backend's several sources are
// counted apart.
func TestMetricsBySource(t *testing.T) {
	a, _, _ := newTest(t, Config{Backend: "sources", Source: "vc-a", TTL: time.Minute})
	b, _, _ := newTest(t, Config{Backend: "sources", Source: "vc-b", TTL: time.Minute})
	_, _ = lookup(t, a, "a")
	a.Invalidate()
	_, _ = lookup(t, a, "a")
	_, _ = lookup(t, b, "a")
	got, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, "multicloud_ccm_snapshot_lists_total", map[string]string{"backend": "sources", "result": "success"}, "source")
	if err != nil || got["vc-a"] != 2 || got["vc-b"] != 1 {
		t.Fatalf("lists_total{backend=sources,result=success} by source = %v, %v; want vc-a 2, vc-b 1", got, err)
	}
}

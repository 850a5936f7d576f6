package cloudapi

// Review probes 62b: the time-based climb of an adaptive bucket, the
// budget_rate gauge under every sharer, and their locking (commit 5be2f2c).

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
)

const probe62bEps = 1e-9

// probe62bSeries is the budget_rate series of exactly (backend, api, kind),
// and whether it exists at all.
func probe62bSeries(t *testing.T, backend, api, kind string) (float64, bool) {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "multicloud_ccm_cloud_api_budget_rate" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["backend"] == backend && got["api"] == api && got["kind"] == kind {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// probe62bLaw is the documented control law with exact time accounting:
// a cut halves the rate the law gives at that instant (never under the
// floor), at most once per window; from a window after the last cut the
// rate is the cut value plus ceiling/adaptSteps per whole window since it.
type probe62bLaw struct {
	c, v    float64
	lastCut time.Time
	cut     bool
}

func (l *probe62bLaw) at(t time.Time) float64 {
	if !l.cut {
		return l.v
	}
	d := t.Sub(l.lastCut)
	if d < adaptWindow {
		return l.v
	}
	return min(l.c, l.v+float64(int(d/adaptWindow))*l.c/adaptSteps)
}

func (l *probe62bLaw) throttle(t time.Time) {
	if l.cut && t.Sub(l.lastCut) < adaptWindow {
		return
	}
	floor := min(l.c, max(l.c/adaptFloor, adaptMinRate))
	l.v = max(floor, l.at(t)*adaptCut)
	l.lastCut, l.cut = t, true
}

// probe62bOld is the law before 5be2f2c: one step per success, at most
// once per window, from a window after the last cut.
type probe62bOld struct {
	c, cur             float64
	lastCut, lastRaise time.Time
}

func (o *probe62bOld) answered(throttled bool, now time.Time) {
	switch {
	case throttled:
		if now.Sub(o.lastCut) < adaptWindow {
			return
		}
		o.lastCut = now
		floor := min(o.c, max(o.c/adaptFloor, adaptMinRate))
		o.cur = max(floor, o.cur*adaptCut)
	case o.cur < o.c && now.Sub(o.lastCut) >= adaptWindow && now.Sub(o.lastRaise) >= adaptWindow:
		o.lastRaise = now
		o.cur = min(o.c, o.cur+o.c/adaptSteps)
	}
}

// TestProbe62bStormNeverAboveLaw: a storm of 30 s, AWS throttling about
// once a second (each throttle k s + a jitter of 0-300 ms), successes every
// 50 ms in between, each request recovering its bucket first (WaitAction)
// and the gauge read after each answer (rate()). The bucket must never be
// above the documented law; reported: its mean and range beside the law's
// and the pre-5be2f2c law's.
func TestProbe62bStormNeverAboveLaw(t *testing.T) {
	const c = 10.0
	clock := &fakeClock{t: time.Unix(7000, 0)}
	b := newBucket(c, 20, ModeAdaptive)
	b.now = clock.now
	law := &probe62bLaw{c: c, v: c}
	old := &probe62bOld{c: c, cur: c}
	r := rand.New(rand.NewPCG(62, 2))
	start := clock.t
	var throttles []time.Time
	for k := range 30 {
		throttles = append(throttles, start.Add(time.Duration(k)*time.Second+time.Duration(r.IntN(300))*time.Millisecond))
	}
	var sumImpl, sumLaw, sumOld float64
	minImpl, maxImpl := math.Inf(1), 0.0
	n, above := 0, 0
	next := 0
	for step := 0; step <= 600; step++ {
		now := start.Add(time.Duration(step) * 50 * time.Millisecond)
		clock.t = now
		throttled := next < len(throttles) && !now.Before(throttles[next])
		if throttled {
			next++
		}
		b.recover()
		b.answered(throttled)
		if throttled {
			law.throttle(now)
		}
		old.answered(throttled, now)
		got, want := b.rate(), law.at(now)
		if got > want+probe62bEps {
			above++
			if above <= 5 {
				t.Errorf("t=%v: bucket %v above the law's %v", now.Sub(start), got, want)
			}
		}
		sumImpl += got
		sumLaw += want
		sumOld += old.cur
		minImpl, maxImpl = min(minImpl, got), max(maxImpl, got)
		n++
	}
	t.Logf("storm 30 s: bucket mean %.3f (min %.3f max %.3f), documented law mean %.3f, pre-5be2f2c law mean %.3f; floor %v",
		sumImpl/float64(n), minImpl, maxImpl, sumLaw/float64(n), sumOld/float64(n), c/adaptFloor)
}

// TestProbe62bStormEveryWindowReachesFloor: a throttled answer at the
// start of every window (every 1 s), successes between: the rate must fall to the floor
// within 4 cuts and stay there. Reported beside it: a storm just over a
// window apart (1.05 s) with a success at +1.0 s, where the law lets the
// rate climb a step before each cut and so hover above the floor.
func TestProbe62bStormEveryWindowReachesFloor(t *testing.T) {
	const c = 16.0
	for _, tc := range []struct {
		period time.Duration
		floor  bool
	}{{time.Second, true}, {1050 * time.Millisecond, false}} {
		t.Run(tc.period.String(), func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(8000, 0)}
			b := newBucket(c, 32, ModeAdaptive)
			b.now = clock.now
			start := clock.t
			nextThrottle := start
			var trace []float64
			for step := 0; step <= 600; step++ { // 30 s, 50 ms a step
				now := start.Add(time.Duration(step) * 50 * time.Millisecond)
				clock.t = now
				// The answer of the request sent a step ago, then the
				// next request's recover.
				if !now.Before(nextThrottle) {
					b.answered(true)
					nextThrottle = nextThrottle.Add(tc.period)
				} else {
					b.answered(false)
				}
				b.recover()
				if step%20 == 19 {
					trace = append(trace, b.rate())
				}
			}
			t.Logf("period %v: rate each second: %v", tc.period, trace)
			if tc.floor {
				for i, r := range trace[4:] {
					if r != 1 {
						t.Errorf("second %d of a storm in every window: rate %v, want the floor 1", i+5, r)
					}
				}
			}
		})
	}
}

// TestProbe62bSparseRequestsClimbAsTheLaw: the law (adaptive.go, and
// docs/aws.md: "each second without throttling raises it by a tenth of the
// ceiling, back to it in about ten seconds"). From the floor, a request
// every 1.5 s (and every 1.9 s), all successes: ten seconds and a bit
// after the last cut the bucket must be back at its ceiling.
func TestProbe62bSparseRequestsClimbAsTheLaw(t *testing.T) {
	const c = 10.0
	for _, every := range []time.Duration{1500 * time.Millisecond, 1900 * time.Millisecond} {
		t.Run(every.String(), func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(9000, 0)}
			b := newBucket(c, 20, ModeAdaptive)
			b.now = clock.now
			for i := range 4 {
				if i > 0 {
					clock.advance(adaptWindow)
				}
				b.answered(true)
			}
			if r := b.rate(); r != c/adaptFloor {
				t.Fatalf("after 4 cuts: %v, want the floor %v", r, c/adaptFloor)
			}
			cut := clock.t
			law := &probe62bLaw{c: c, v: c / adaptFloor, lastCut: cut, cut: true}
			for clock.t.Sub(cut) < 12*time.Second {
				clock.advance(every)
				b.recover() // WaitAction
				b.answered(false)
			}
			got, want := b.rate(), law.at(clock.t)
			t.Logf("a request every %v: %v after the last cut the bucket is at %v, the law at %v", every, clock.t.Sub(cut), got, want)
			if got < want-probe62bEps {
				t.Errorf("a request every %v: %v after the last cut the bucket is at %v a second, the documented law at %v (fractions of a window lost at each raise)", every, clock.t.Sub(cut), got, want)
			}
		})
	}
}

// TestProbe62bRateReadChangesTheClimb: reading the rate (the gauge's
// publish from another action's Observe) must not change where the bucket
// is later: two identical buckets cut at once, one read at +1.9 s, both
// read at +3.5 s.
func TestProbe62bRateReadChangesTheClimb(t *testing.T) {
	clock := &fakeClock{t: time.Unix(9500, 0)}
	a, b := newBucket(10, 20, ModeAdaptive), newBucket(10, 20, ModeAdaptive)
	a.now, b.now = clock.now, clock.now
	a.answered(true)
	b.answered(true)
	clock.advance(1900 * time.Millisecond)
	_ = a.rate() // a gauge read
	clock.advance(1600 * time.Millisecond)
	ra, rb := a.rate(), b.rate()
	if ra != rb {
		t.Errorf("3.5 s after the same cut: the bucket whose rate was read at 1.9 s is at %v, the other at %v", ra, rb)
	}
}

// TestProbe62bNewBucketThrottledAtOnce: a bucket made and throttled at
// once halves (no zero-time window blocks the cut), stays there for a
// window (a rate read does not climb it), then climbs a step per window,
// its burst following.
func TestProbe62bNewBucketThrottledAtOnce(t *testing.T) {
	clock := &fakeClock{t: time.Unix(10000, 0)}
	b := newBucket(10, 20, ModeAdaptive)
	b.now = clock.now
	if !b.answered(true) || b.rate() != 5 || b.lim.Burst() != 10 {
		t.Fatalf("throttled at birth: rate %v burst %d, want 5 and 10", b.rate(), b.lim.Burst())
	}
	if b.recover() || b.answered(false) || b.rate() != 5 {
		t.Errorf("at the cut's instant: rate %v, want 5", b.rate())
	}
	clock.advance(adaptWindow - time.Nanosecond)
	if b.recover() || b.rate() != 5 {
		t.Errorf("a nanosecond before the window: rate %v, want 5", b.rate())
	}
	clock.advance(time.Nanosecond)
	if r := b.rate(); r != 6 || b.lim.Burst() != 12 {
		t.Errorf("a window after the cut: rate %v burst %d, want 6 and 12", r, b.lim.Burst())
	}
	clock.advance(2500 * time.Millisecond)
	if r := b.rate(); r != 8 {
		t.Errorf("2.5 s later: rate %v, want 8", r)
	}
	clock.advance(time.Hour)
	if r := b.rate(); r != 10 || b.lim.Burst() != 20 || b.lim.Limit() != 10 {
		t.Errorf("an hour later: rate %v burst %d limit %v, want 10, 20, 10", r, b.lim.Burst(), b.lim.Limit())
	}
}

// TestProbe62bClimbAfterCutWithOlderRaise: a raise, then a cut: the climb
// counts windows from the cut only (not the raise before it), waits a
// whole window after the cut, and counts the windows it sat idle after
// that. Reported: a cut after an idle while halves the stale rate, not
// the rate the law would have climbed to (cuts do not climb first).
func TestProbe62bClimbAfterCutWithOlderRaise(t *testing.T) {
	clock := &fakeClock{t: time.Unix(11000, 0)}
	t0 := clock.t
	b := newBucket(10, 20, ModeAdaptive)
	b.now = clock.now
	b.answered(true) // 5 at 0
	clock.t = t0.Add(time.Second)
	b.answered(false) // 6 at 1 s
	clock.t = t0.Add(1500 * time.Millisecond)
	b.answered(true) // 3 at 1.5 s, lastRaise (1 s) older than lastCut
	if r := b.rate(); r != 3 {
		t.Fatalf("after raise then cut: %v, want 3", r)
	}
	clock.t = t0.Add(2400 * time.Millisecond)
	if r := b.rate(); r != 3 {
		t.Errorf("0.9 s after the cut (1.4 s after the raise): %v, want 3", r)
	}
	clock.t = t0.Add(2500 * time.Millisecond)
	if r := b.rate(); r != 4 {
		t.Errorf("a window after the cut: %v, want 4", r)
	}
	clock.t = t0.Add(4600 * time.Millisecond)
	if r := b.rate(); r != 6 {
		t.Errorf("2.1 s after the raise at 2.5 s: %v, want 6", r)
	}

	// Cut after an idle while, straight from Observe (no request recovered
	// the bucket first): halves the stale 6.
	clock.t = t0.Add(20 * time.Second)
	law := 10.0 // 6 at 4.6 s, +15 windows: the ceiling
	b.answered(true)
	got := b.rate()
	t.Logf("a throttled answer 15.4 s after the last raise, no recover first: rate %v (the documented law, climbing first: %v)", got, law*adaptCut)
	if got != 3 {
		t.Errorf("cut after idle: %v, want 3 (half the stale 6)", got)
	}
}

// TestProbe62bIdleRecoveryRefillsTokens: an adaptive bucket slowed to the
// floor, its tokens spent, then idle for an hour: the law says it is back
// at its ceiling when next used. Its rate and burst are; are its tokens,
// as a bucket never slowed and idle as long? (AWS's bucket is full.)
func TestProbe62bIdleRecoveryRefillsTokens(t *testing.T) {
	clock := &fakeClock{t: time.Unix(12000, 0)}
	slowed := newBucket(10, 39, ModeAdaptive)
	plain := newBucket(10, 39, ModeAdaptive)
	slowed.now, plain.now = clock.now, clock.now
	for _, b := range []*bucket{slowed, plain} {
		b.lim.SetLimitAt(clock.t, b.lim.Limit()) // the limiter on the fake clock
		if !b.lim.AllowN(clock.t, 39) {
			t.Fatal("a full bucket refused its burst")
		}
	}
	for i := range 4 {
		if i > 0 {
			clock.advance(adaptWindow)
		}
		slowed.answered(true)
	}
	if slowed.rate() != 10.0/adaptFloor || slowed.lim.Burst() != 3 {
		t.Fatalf("after 4 cuts: rate %v burst %d, want %v and 3", slowed.rate(), slowed.lim.Burst(), 10.0/adaptFloor)
	}
	clock.advance(time.Hour)
	if !slowed.recover() {
		t.Fatal("an hour idle: recover changed nothing")
	}
	plain.recover()
	t.Logf("an hour idle: slowed bucket rate %v burst %d tokens %.2f; never-slowed bucket rate %v burst %d tokens %.2f",
		slowed.lim.Limit(), slowed.lim.Burst(), slowed.lim.TokensAt(clock.t), plain.lim.Limit(), plain.lim.Burst(), plain.lim.TokensAt(clock.t))
	if slowed.lim.Limit() != 10 || slowed.lim.Burst() != 39 {
		t.Errorf("an hour idle: rate %v burst %d, want the ceiling 10 and 39", slowed.lim.Limit(), slowed.lim.Burst())
	}
	if got := slowed.lim.TokensAt(clock.t); got < 39-probe62bEps {
		t.Errorf("an hour idle after a storm: %.2f tokens, want the full 39 of a bucket back at its ceiling (the idle hour was refilled under the storm's burst of 3): 39 requests now take %.1f s instead of none",
			got, (39-got)/10)
	}
}

// TestProbe62bGaugeFollowsIdleRecovery: budget_rate's help says the gauge
// is "back at the configured ceiling once the throttling stops", and the
// docs that a bucket climbs back with time whether used or not. A bucket
// slowed and then idle a minute: what does the gauge show? (Not per
// action, then per action with no other action busy.)
func TestProbe62bGaugeFollowsIdleRecovery(t *testing.T) {
	// Fixed: while a kind is under its ceiling, a timer publishes it again
	// once it can be back at its ceiling (publish). Real time here: the
	// timer is the process's. A ceiling of 10 cut once to 5 is back in 5
	// windows; the recheck comes a window later.
	for _, perAction := range []bool{false, true} {
		t.Run(fmt.Sprintf("perAction=%v", perAction), func(t *testing.T) {
			t.Parallel()
			be := fmt.Sprintf("probe62b-idle-gauge-%v", perAction)
			b := NewBudget(be, nil, map[string]RateLimit{"x": {QPS: 10, Bucket: 20, QPSWrite: 2, BucketWrite: 4, PerActionReads: perAction}})
			b.Observe("x", "Describe", false, OutcomeThrottled, 0)
			if g, _ := probe62bSeries(t, be, "x", "read"); g != 5 {
				t.Fatalf("gauge after a throttle: %v, want 5", g)
			}
			deadline := time.Now().Add(6*adaptWindow + 3*time.Second)
			for {
				g, _ := probe62bSeries(t, be, "x", "read")
				if g == 10 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%v without throttling (nothing sent): budget_rate still %v, want the ceiling 10", 6*adaptWindow+3*time.Second, g)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if r := b.bucket("x", "Describe", false).rate(); r != 10 {
				t.Errorf("bucket: %v, want 10", r)
			}
		})
	}
}

// TestProbe62bRateReadRacesAnswered: the gauge's rate read (which now
// climbs, and so writes the bucket and its limiter) against answers,
// recovers, Observe and Wait of the same buckets; run with -race.
func TestProbe62bRateReadRacesAnswered(_ *testing.T) {
	defs := map[string]RateLimit{
		"per": {QPS: 1e6, Bucket: 1e6, QPSWrite: 1e6, BucketWrite: 1e6, PerActionReads: true, PerActionWrites: true},
		"one": {QPS: 1e6, Bucket: 1e6, QPSWrite: 1e6, BucketWrite: 1e6},
	}
	b := NewBudget("probe62b-race", nil, defs)
	deadline := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 62))
			for time.Now().Before(deadline) {
				api := []string{"per", "one"}[r.IntN(2)]
				act := fmt.Sprintf("A%d", r.IntN(3))
				write := r.IntN(2) == 0
				switch r.IntN(6) {
				case 0:
					_ = b.WaitAction(context.Background(), api, act, write)
				case 1:
					b.Observe(api, act, write, OutcomeThrottled, 0)
				case 2:
					b.Observe(api, act, write, OutcomeSuccess, 0)
				case 3:
					_, _ = b.api(api).rate(write)
				case 4:
					_ = b.api(api).slowed(write)
				case 5:
					b.buckets().publish(api, write)
				}
			}
		})
	}
	wg.Wait()
}

// TestProbe62bConcurrentRetuneShareObserveWait: Retune (shared lock, then
// publish: apiBudget.mu, bucket.mu, buckets.mu), NewSharedBudget of the
// same key (shared lock, then join: buckets.mu), budgets dropped and
// collected, Observe and WaitAction of reads and writes, all at once;
// a watchdog dumps the goroutines if it does not end. Run with -race.
func TestProbe62bConcurrentRetuneShareObserveWait(t *testing.T) {
	const key = "probe62b-conc-key"
	limA := map[string]RateLimit{APIEC2: {QPS: 1e6, Bucket: 1e6, QPSWrite: 1e6, BucketWrite: 1e6}, APIELBv2: {QPS: 1e6, Bucket: 1e6, QPSWrite: 1e6, BucketWrite: 1e6}}
	limB := map[string]RateLimit{APIEC2: {QPS: 5e5, Bucket: 1e6, QPSWrite: 5e5, BucketWrite: 1e6}, APIELBv2: {QPS: 5e5, Bucket: 1e6, QPSWrite: 5e5, BucketWrite: 1e6}}
	root := NewSharedBudget("probe62b-conc-root", key, limA, AWSDefaults)
	var live atomic.Pointer[Budget]
	live.Store(NewSharedBudget("probe62b-conc-0", key, limA, AWSDefaults))

	done := make(chan struct{})
	deadline := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	wg.Go(func() { // Retune, both budgets, alternating limits
		for i := 0; time.Now().Before(deadline); i++ {
			lim := limA
			if i%2 == 1 {
				lim = limB
			}
			if i%3 == 0 {
				live.Load().Retune(key, lim, AWSDefaults)
			} else {
				root.Retune(key, lim, AWSDefaults)
			}
		}
	})
	wg.Go(func() { // new sharers, old ones dropped and collected
		for i := 1; time.Now().Before(deadline); i++ {
			live.Store(NewSharedBudget(fmt.Sprintf("probe62b-conc-%d", i%4), key, limA, AWSDefaults))
			if i%50 == 0 {
				runtime.GC()
			}
		}
	})
	for g := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 620))
			for i := 0; time.Now().Before(deadline); i++ {
				bb := root
				if g%2 == 1 {
					bb = live.Load()
				}
				api := []string{APIEC2, APIELBv2}[r.IntN(2)]
				act := fmt.Sprintf("Act%d", r.IntN(5))
				write := r.IntN(2) == 0
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				if err := bb.WaitAction(ctx, api, act, write); err != nil {
					t.Errorf("wait: %v", err)
				}
				cancel()
				out := OutcomeSuccess
				if i%5 == 0 {
					out = OutcomeThrottled
				}
				bb.Observe(api, act, write, out, 0)
				if i%7 == 0 {
					bb.buckets().publish(api, write)
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("no end after 20 s (deadlock?):\n%s", buf[:n])
	}
	if names := root.buckets().backends(); len(names) > 5 {
		t.Errorf("sharers' names after the churn: %v (at most root and 4 names)", names)
	}
}

// TestProbe62bGaugeAfterRacingRetune: an Observe that cuts a bucket
// publishes the rate it read; a Retune at the same time publishes the new
// full bucket's ceiling. Once both are done the gauge must show the live
// bucket's rate, whichever order they ran in. (Rounds for at most 3 s.)
func TestProbe62bGaugeAfterRacingRetune(t *testing.T) {
	const be = "probe62b-retune-race"
	defs := map[string]RateLimit{"x": {QPS: 10, Bucket: 20, QPSWrite: 2, BucketWrite: 4}}
	b := NewBudget(be, nil, defs)
	stale, rounds := 0, 0
	for end := time.Now().Add(3 * time.Second); rounds < 3000 && time.Now().Before(end); rounds++ {
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() { <-start; b.Observe("x", "", false, OutcomeThrottled, 0) })
		wg.Go(func() { <-start; b.Retune("", nil, defs) })
		close(start)
		wg.Wait()
		r, _ := b.api("x").rate(false)
		if g, _ := probe62bSeries(t, be, "x", "read"); g != r {
			stale++
			if stale <= 3 {
				t.Logf("round %d: budget_rate %v, live bucket %v", rounds, g, r)
			}
		}
	}
	if stale > 0 {
		t.Errorf("%d of %d rounds of a throttled answer beside a Retune left budget_rate other than the live bucket's rate (the two publishes read and set the gauge unordered)", stale, rounds)
	}
}

// TestProbe62bGaugeAfterRacingRecoverAndCut: the same without Retune: a
// request's recover (a climb, published) beside a throttled answer (a
// cut, published) of the same bucket. Once both are done the gauge must
// show the bucket's rate. (Rounds for at most 3 s.)
func TestProbe62bGaugeAfterRacingRecoverAndCut(t *testing.T) {
	const be = "probe62b-recover-race"
	b := NewBudget(be, nil, map[string]RateLimit{"x": {QPS: 1000, Bucket: 2000, QPSWrite: 2, BucketWrite: 4}})
	clock := &fakeClock{t: time.Unix(14000, 0)}
	bk := b.bucket("x", "", false)
	bk.now = clock.now
	stale, rounds := 0, 0
	finals := map[float64]int{}
	for end := time.Now().Add(3 * time.Second); rounds < 3000 && time.Now().Before(end); rounds++ {
		clock.advance(time.Hour)
		_ = b.WaitAction(context.Background(), "x", "", false) // back at 1000
		b.Observe("x", "", false, OutcomeThrottled, 0)         // 500
		clock.advance(2 * adaptWindow)                         // both a climb (700) and a cut are due
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() { <-start; _ = b.WaitAction(context.Background(), "x", "", false) })
		wg.Go(func() { <-start; b.Observe("x", "", false, OutcomeThrottled, 0) })
		close(start)
		wg.Wait()
		r := bk.rate()
		finals[r]++
		if g, _ := probe62bSeries(t, be, "x", "read"); g != r {
			stale++
			if stale <= 3 {
				t.Logf("round %d: budget_rate %v, bucket %v", rounds, g, r)
			}
		}
	}
	t.Logf("%d rounds; the bucket's rate after each (350: climb then cut, 250: cut first): %v", rounds, finals)
	if stale > 0 {
		t.Errorf("%d of %d rounds of a recover beside a throttled answer left budget_rate other than the bucket's rate", stale, rounds)
	}
}

// probe62bDropSharer makes a sharer of key under name, publishes through
// it, and drops it.
//
//go:noinline
func probe62bDropSharer(name, key string, defs map[string]RateLimit) {
	s := NewSharedBudget(name, key, nil, defs)
	s.Observe("x", "", false, OutcomeThrottled, 0)
}

// TestProbe62bWeakSharerPruned: a sharer dropped and collected is no
// longer published under, and leaves the sharers' list; reported: whether
// its last series stays in the registry.
func TestProbe62bWeakSharerPruned(t *testing.T) {
	const key = "probe62b-weak-key"
	defs := map[string]RateLimit{"x": {QPS: 10, Bucket: 20, QPSWrite: 2, BucketWrite: 4}}
	a := NewSharedBudget("probe62b-weak-a", key, nil, defs)
	probe62bDropSharer("probe62b-weak-b", key, defs)
	if g, ok := probe62bSeries(t, "probe62b-weak-b", "x", "read"); !ok || g != 5 {
		t.Fatalf("the sharer's own gauge: %v %v, want 5", g, ok)
	}
	if g, _ := probe62bSeries(t, "probe62b-weak-a", "x", "read"); g != 5 {
		t.Errorf("the other sharer's gauge: %v, want 5", g)
	}
	runtime.GC()
	runtime.GC()
	if g, ok := probe62bSeries(t, "probe62b-weak-b", "x", "read"); ok {
		t.Logf("after the sharer is collected its series stays: budget_rate{backend=probe62b-weak-b} = %v (never deleted)", g)
	}
	budgetRate.Delete(map[string]string{"backend": "probe62b-weak-b", "api": "x", "kind": "read"})
	a.Retune(key, nil, defs)
	if _, ok := probe62bSeries(t, "probe62b-weak-b", "x", "read"); ok {
		t.Error("a Retune after the sharer was collected published under it again")
	}
	if g, _ := probe62bSeries(t, "probe62b-weak-a", "x", "read"); g != 10 {
		t.Errorf("the live sharer's gauge after Retune: %v, want 10", g)
	}
	as := a.buckets()
	as.mu.Lock()
	n := len(as.sharers)
	as.mu.Unlock()
	if n != 1 {
		t.Errorf("sharers after the collection and a publish: %d, want 1", n)
	}
	runtime.KeepAlive(a)
}

// TestProbe62bDuplicateNames: two budgets of the same backend name on the
// same buckets: one series, both counted as sharers, the name kept while
// either lives. Reported: two budgets of one name on different buckets (a
// reload's old and new backend) write the same series in turn.
func TestProbe62bDuplicateNames(t *testing.T) {
	const key, be = "probe62b-dup-key", "probe62b-dup"
	defs := map[string]RateLimit{"x": {QPS: 10, Bucket: 20, QPSWrite: 2, BucketWrite: 4}}
	a := NewSharedBudget(be, key, nil, defs)
	probe62bDropSharer(be, key, defs)
	if names := a.buckets().backends(); len(names) != 1 || names[0] != be {
		t.Errorf("names: %v, want [%s] once", names, be)
	}
	runtime.GC()
	runtime.GC()
	a.Retune(key, nil, defs)
	if g, ok := probe62bSeries(t, be, "x", "read"); !ok || g != 10 {
		t.Errorf("after one of the two was collected: %v %v, want 10", g, ok)
	}
	if names := a.buckets().backends(); len(names) != 1 {
		t.Errorf("names after collection: %v", names)
	}

	// Not shared: a reload's old and new budget of one backend.
	const be2 = "probe62b-dup-unshared"
	oldB := NewBudget(be2, nil, defs)
	newB := NewBudget(be2, nil, defs)
	newB.Retune("", nil, defs)
	oldB.Observe("x", "", false, OutcomeThrottled, 0)
	g, _ := probe62bSeries(t, be2, "x", "read")
	r, _ := newB.api("x").rate(false)
	t.Logf("unshared budgets of one name: the old one's throttle sets budget_rate{backend=%s} to %v while the new one's bucket is at %v", be2, g, r)
	runtime.KeepAlive(oldB)
	runtime.KeepAlive(a)
}

// TestProbe62bSessionWaitsOnTheBucketObserved: change 4 says a Transport
// waits on the bucket of the action it observes. A session's request
// (Session) waits with WaitSession (action "") but is observed under its
// action: on an API with a bucket per write action, throttled logins cut a
// bucket the logins never wait on. Latent: no Transport API is per action
// today.
func TestProbe62bSessionWaitsOnTheBucketObserved(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	b := NewBudget("probe62b-session", nil, map[string]RateLimit{"x": {QPS: 8, Bucket: 100, QPSWrite: 8, BucketWrite: 100, PerActionWrites: true}})
	tr := &Transport{Budget: b, DefaultAPI: "x", Session: func(*http.Request) bool { return true }, MaxBackoff: time.Millisecond,
		sleep: func(context.Context, time.Duration) error { return nil }}
	c := &http.Client{Transport: tr}
	resp, err := c.Post(srv.URL+"/session", "text/plain", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	// Fixed: WaitSession takes the action's bucket, the one Observe cuts:
	// no bucket of "" is made beside it, and POST's is the one slowed.
	if keys := probe62Keys(b.api("x")); !slices.Equal(keys, []string{"write:" + http.MethodPost}) {
		t.Errorf("buckets %v, want only the session's action's, write:%s", keys, http.MethodPost)
	}
	if r := b.bucket("x", http.MethodPost, true).rate(); r == 8 {
		t.Errorf("throttled session requests left the bucket they waited on at 8")
	}
}

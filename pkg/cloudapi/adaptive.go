package cloudapi

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi/limits"
)

// Modes of a bucket (RateLimit.Mode): limits.ModeAdaptive and
// limits.ModeFixed, which say what each does.
const (
	// ModeAdaptive: the configured rate is a ceiling, cut when the cloud
	// throttles anyway. The default.
	ModeAdaptive = limits.ModeAdaptive
	// ModeFixed: the configured rate, whatever the cloud answers.
	ModeFixed = limits.ModeFixed
)

// The adaptive mode's control law, additive increase and multiplicative
// decrease as TCP's congestion control (and the AWS SDK's adaptive retry
// mode, which backs off by 0.7 and climbs back on a cubic curve):
//   - a throttling answer multiplies the rate by adaptCut, at most once
//     per adaptWindow (the requests sent before the cut are answered
//     throttled together: one cut for them all);
//   - the rate never goes under ceiling/adaptFloor, nor under
//     adaptMinRate (the SDK's minimum) unless the ceiling is lower;
//   - once adaptWindow has passed since the last cut, the rate climbs by
//     ceiling/adaptSteps for each adaptWindow without throttling: from
//     the floor back to the ceiling in about adaptSteps seconds. A bucket
//     catches up on the windows it sat idle at its next request (or
//     answer, or rate read): an action throttled once and not used for a
//     while is back at its ceiling, not still slowed by an old storm.
const (
	adaptCut     = 0.5
	adaptFloor   = 16
	adaptMinRate = 0.5
	adaptSteps   = 10
	adaptWindow  = time.Second
)

// bucket is one token bucket of a budget (an API's reads, or its
// mutations), fixed or adaptive.
type bucket struct {
	lim      *rate.Limiter
	adaptive bool
	ceiling  float64
	burst    int
	now      func() time.Time

	mu                 sync.Mutex
	cur                float64
	lastCut, lastRaise time.Time
}

// newBucket returns a bucket of qps and burst, adaptive or not; nil (no
// limit) for a negative rate (Off), which has no ceiling to adapt under.
func newBucket(qps float64, burst int, mode string) *bucket {
	if qps < 0 {
		return nil
	}
	if burst < 1 {
		burst = max(1, int(math.Ceil(2*qps)))
	}
	return &bucket{
		lim:      rate.NewLimiter(rate.Limit(qps), burst),
		adaptive: mode != ModeFixed,
		ceiling:  qps,
		burst:    burst,
		cur:      qps,
		now:      time.Now,
	}
}

// rate is the bucket's current rate, requests a second, brought up to
// date with the time passed without throttling.
func (b *bucket) rate() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.adaptive && b.ceiling != 0 {
		b.climb(b.now())
	}
	return b.cur
}

// answered adapts the bucket to one answer of the cloud: throttled, or
// not (any other answer, an error included, says the bucket had tokens).
// It reports whether the rate changed.
func (b *bucket) answered(throttled bool) bool {
	if b == nil || !b.adaptive || b.ceiling == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if !throttled {
		return b.climb(now)
	}
	if now.Sub(b.lastCut) < adaptWindow {
		return false
	}
	b.lastCut = now
	floor := min(b.ceiling, max(b.ceiling/adaptFloor, adaptMinRate))
	next := max(floor, b.cur*adaptCut)
	if next == b.cur {
		return false
	}
	b.set(next, now)
	return true
}

// recover brings the rate up to date with the time passed without
// throttling, before a request takes its token; it reports whether the
// rate changed.
func (b *bucket) recover() bool {
	if b == nil || !b.adaptive || b.ceiling == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.climb(b.now())
}

// climb raises the rate by ceiling/adaptSteps for each whole adaptWindow
// since the last cut or raise, once adaptWindow has passed since the last
// cut. Each step is taken at the end of its own window, in the past when
// the bucket sat idle: the tokens it earned meanwhile are earned at the
// rate it had then, so a bucket idle long enough is back at its ceiling
// with a full burst, as one never slowed; and the part of a window not
// yet over counts towards the next step, however often climb is called.
// The caller holds b.mu.
func (b *bucket) climb(now time.Time) bool {
	if b.cur >= b.ceiling || now.Sub(b.lastCut) < adaptWindow || now.Sub(b.lastRaise) < adaptWindow {
		return false
	}
	since := b.lastRaise
	if b.lastCut.After(since) {
		since = b.lastCut
	}
	if since.IsZero() {
		b.lastRaise = now
		b.set(min(b.ceiling, b.cur+b.ceiling/adaptSteps), now)
		return true
	}
	for at := since.Add(adaptWindow); !at.After(now) && b.cur < b.ceiling; at = at.Add(adaptWindow) {
		b.lastRaise = at
		b.set(min(b.ceiling, b.cur+b.ceiling/adaptSteps), at)
	}
	return true
}

// set changes the rate, and the burst in proportion (a bucket slowed to
// a tenth of its rate must not send its whole burst at once after an
// idle while). The caller holds b.mu.
func (b *bucket) set(r float64, now time.Time) {
	b.cur = r
	b.lim.SetLimitAt(now, rate.Limit(r))
	b.lim.SetBurstAt(now, max(1, int(math.Ceil(float64(b.burst)*r/b.ceiling))))
}

// Package cloudapi keeps a backend's calls to its cloud inside the cloud's
// API budget, and counts them.
//
// Every cloud throttles its API per account (AWS per account and region,
// with token buckets shared by every tool in the account). A CCM that
// spends the bucket makes every other tool of the account fail, and then
// itself. So each backend takes a token from its own client-side bucket
// before each request, one bucket per API family and kind (reads apart from
// mutations: a burst of reads must not delay a delete), sized by default to
// a documented fraction of the cloud's published rate, configurable in the
// backend's section (RateLimits). A throttling answer that gets through
// anyway is retried with backoff and jitter by the backend's client, never
// surfaced as "not found".
//
// A leader paused past its leader-election lease must not write to the
// cloud beside the replica that leads now: every mutation is first put to
// the process's mutation gate (SetMutationGate, set from the fence of
// pkg/fence), which refuses it, before anything is sent, with an error
// wrapping ErrMutationRefused. Reads pass.
//
// The names follow the one upstream precedent for client-side cloud rate
// limits, cloud-provider-azure's cloudProviderRateLimitQPS/Bucket and
// QPSWrite/BucketWrite: qps and bucket for reads, qpsWrite and bucketWrite
// for mutations.
//
//	request ──▶ Budget.Wait(api, write?) ──▶ cloud ──▶ outcome
//	              │ mutation gate (writes)    │
//	              │ token bucket per          │
//	              │ (api, read|write)         └─▶ calls_total{backend,api,action,outcome}
//	              └─▶ wait_seconds_total          throttled_total{backend,api}
//	                                              call_duration_seconds{backend,api}
package cloudapi

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi/limits"
)

// Off is the qps or qpsWrite that turns a bucket off: its requests are
// counted but never wait (limits.Off).
const Off = limits.Off

// RateLimit is one API family's client-side budget: reads (qps, bucket)
// and mutations (qpsWrite, bucketWrite). A zero field takes the backend's
// default for that API; qps or qpsWrite -1 (Off) turns that bucket off.
// It is limits.RateLimit, which a backend's config section can name
// without importing this package.
type RateLimit = limits.RateLimit

// ValidateLimits checks every API of a backend's rateLimits section
// against the APIs the backend has (the keys of defaults):
// limits.ValidateLimits.
func ValidateLimits(l, defaults map[string]RateLimit, path *field.Path) field.ErrorList {
	return limits.ValidateLimits(l, defaults, path)
}

// Budget is one backend's buckets, by API family. It lives as long as the
// backend's clients (one configuration of the backend): a reload that
// rebuilds the backend starts with full buckets, as a restart would, unless
// another live backend shares them (NewSharedBudget).
type Budget struct {
	backend string
	// set are the buckets it takes its tokens from: its own, or those of
	// the backends of its account (NewSharedBudget); a retune may move it
	// onto the set its new limits' key holds (Retune).
	set atomic.Pointer[buckets]
}

// newBudgetOn is the budget of backend on the buckets s, one of their
// sharers.
func newBudgetOn(backend string, s *buckets) *Budget {
	b := &Budget{backend: backend}
	b.set.Store(s)
	return b.join()
}

// buckets are the buckets the budget takes its tokens from now.
func (b *Budget) buckets() *buckets {
	if b == nil {
		return nil
	}
	return b.set.Load()
}

// buckets are the token buckets of one budget, by API; backends of one
// account share them (NewSharedBudget). Retune replaces them all at once.
type buckets struct {
	apis atomic.Pointer[map[string]*apiBudget]
	// key is the NewSharedBudget key they are shared under ("" for none).
	key string

	// sharers are the live budgets taking tokens from these buckets,
	// each with its backend's name: a bucket's rate is shown under each
	// of them (budget_rate).
	mu      sync.Mutex
	sharers []weak.Pointer[Budget]

	// pubMu orders the gauge's updates (publish reads a rate and sets
	// it: two at once would leave the older read last); recheck are the
	// timers that show a slowed kind's climb while nothing is sent, by
	// "api/kind".
	pubMu   sync.Mutex
	recheck map[string]*time.Timer
}

// join makes b one of its buckets' sharers and returns it.
func (b *Budget) join() *Budget {
	s := b.buckets()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sharers = append(s.sharers, weak.Make(b))
	return b
}

// leave takes budget out of b's sharers (it moved onto other buckets).
func (b *buckets) leave(budget *Budget) {
	b.mu.Lock()
	defer b.mu.Unlock()
	me := weak.Make(budget)
	b.sharers = slices.DeleteFunc(b.sharers, func(p weak.Pointer[Budget]) bool { return p == me })
}

// backends are the names of the live budgets sharing b's buckets.
func (b *buckets) backends() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var names []string
	live := b.sharers[:0]
	for _, p := range b.sharers {
		if s := p.Value(); s != nil {
			live = append(live, p)
			if !slices.Contains(names, s.backend) {
				names = append(names, s.backend)
			}
		}
	}
	clear(b.sharers[len(live):])
	b.sharers = live
	return names
}

// publish sets budget_rate of api's reads or writes, under every backend
// sharing the buckets, to the kind's current rate, or deletes it for a
// bucket turned off.
//
// While the kind is under its ceiling, a timer publishes it again when it
// should have climbed back (adaptSteps windows at most), so that an API
// nothing is sent to after a throttling storm shows its ceiling again, not
// the rate of its last request.
func (b *buckets) publish(api string, write bool) {
	if b == nil {
		return
	}
	b.pubMu.Lock()
	defer b.pubMu.Unlock()
	b.publishLocked(api, write)
}

// publishLocked is publish with b.pubMu held. The timer it sets holds the
// buckets, not a Budget: a dropped backend's Budget is still collected,
// and goes out of the sharers.
func (b *buckets) publishLocked(api string, write bool) {
	kind := "read"
	if write {
		kind = "write"
	}
	a := b.api(api)
	if a == nil {
		return
	}
	r, ok := a.rate(write)
	for _, name := range b.backends() {
		if ok {
			budgetRate.WithLabelValues(name, api, kind).Set(r)
		} else {
			budgetRate.Delete(map[string]string{"backend": name, "api": api, "kind": kind})
		}
	}
	key := api + "/" + kind
	if t := b.recheck[key]; t != nil {
		t.Stop()
		delete(b.recheck, key)
	}
	ceiling := a.ceiling(write)
	if !ok || r >= ceiling {
		return
	}
	// Until the slowest bucket can be back at its ceiling, and a window
	// more; again only if it climbed meanwhile (a bucket whose clock does
	// not move, in a test, is not rechecked forever).
	windows := math.Ceil((ceiling-r)/(ceiling/adaptSteps)) + 1
	if b.recheck == nil {
		b.recheck = map[string]*time.Timer{}
	}
	b.recheck[key] = time.AfterFunc(time.Duration(windows)*adaptWindow, func() {
		b.pubMu.Lock()
		defer b.pubMu.Unlock()
		cur := b.api(api)
		if cur == nil {
			return
		}
		if now, ok := cur.rate(write); ok && now != r {
			b.publishLocked(api, write)
		}
	})
}

// apiBudget is one API's buckets: one for its reads and one for its
// mutations, or, where the cloud keeps one per action (RateLimit's
// PerActionReads, PerActionWrites), one per action of that kind, made at
// its first request.
type apiBudget struct {
	read, write *bucket
	limit       RateLimit

	mu      sync.Mutex
	actions map[actionKey]*bucket
}

type actionKey struct {
	action string
	write  bool
}

func newAPIBudget(l RateLimit) *apiBudget {
	a := &apiBudget{limit: l}
	if !l.PerActionReads {
		a.read = newBucket(l.QPS, l.Bucket, l.Mode)
	}
	if !l.PerActionWrites {
		a.write = newBucket(l.QPSWrite, l.BucketWrite, l.Mode)
	}
	return a
}

func (a *apiBudget) perAction(write bool) bool {
	if write {
		return a.limit.PerActionWrites
	}
	return a.limit.PerActionReads
}

// bucket is the bucket of one request: action's own where the API keeps
// one per action, else the kind's; nil for none (turned off).
func (a *apiBudget) bucket(action string, write bool) *bucket {
	if !a.perAction(write) {
		if write {
			return a.write
		}
		return a.read
	}
	qps, burst := a.limit.QPS, a.limit.Bucket
	if write {
		qps, burst = a.limit.QPSWrite, a.limit.BucketWrite
	}
	if qps < 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := actionKey{action, write}
	bk := a.actions[k]
	if bk == nil {
		if a.actions == nil {
			a.actions = map[actionKey]*bucket{}
		}
		bk = newBucket(qps, burst, a.limit.Mode)
		a.actions[k] = bk
	}
	return bk
}

// rate is the current rate of the kind's bucket, the slowest of its
// actions' where it has one per action (the configured ceiling before
// any request); false for none.
func (a *apiBudget) rate(write bool) (float64, bool) {
	if !a.perAction(write) {
		bk := a.read
		if write {
			bk = a.write
		}
		if bk == nil {
			return 0, false
		}
		return bk.rate(), true
	}
	r := a.limit.QPS
	if write {
		r = a.limit.QPSWrite
	}
	if r < 0 {
		return 0, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, bk := range a.actions {
		if k.write == write {
			r = min(r, bk.rate())
		}
	}
	return r, true
}

// ceiling is the kind's configured rate.
func (a *apiBudget) ceiling(write bool) float64 {
	if write {
		return a.limit.QPSWrite
	}
	return a.limit.QPS
}

// slowed tells whether one of the kind's per-action buckets is under its
// ceiling: the kind's rate, the slowest bucket's, may then have climbed
// since it was shown.
func (a *apiBudget) slowed(write bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, bk := range a.actions {
		if k.write == write && bk.adaptive && bk.ceiling != 0 {
			bk.mu.Lock()
			below := bk.cur < bk.ceiling
			bk.mu.Unlock()
			if below {
				return true
			}
		}
	}
	return false
}

// bucket is the bucket a request of api's action takes its token from,
// nil for none.
func (b *Budget) bucket(api, action string, write bool) *bucket {
	a := b.api(api)
	if a == nil {
		return nil
	}
	return a.bucket(action, write)
}

func (b *Budget) api(api string) *apiBudget {
	return b.buckets().api(api)
}

func (b *buckets) api(api string) *apiBudget {
	if b == nil {
		return nil
	}
	return (*b.apis.Load())[api]
}

// NewBudget returns the buckets of backend: for each API of defaults, the
// configured limits (limits[api]) over the defaults.
func NewBudget(backend string, limits, defaults map[string]RateLimit) *Budget {
	return newBudgetOn(backend, newBuckets(limits, defaults))
}

func newBuckets(limits, defaults map[string]RateLimit) *buckets {
	b := &buckets{}
	b.apis.Store(newAPIs(limits, defaults))
	return b
}

func newAPIs(limits, defaults map[string]RateLimit) *map[string]*apiBudget {
	apis := map[string]*apiBudget{}
	for api, def := range defaults {
		apis[api] = newAPIBudget(limits[api].WithDefaults(def))
	}
	return &apis
}

// Retune gives the budget new limits in place (a live reload that changes
// only a backend's rateLimits): every bucket is replaced at once by a full
// one of the new limits, as a restart would make it, and a request waits
// for the new buckets from its next token on (a wait already under way
// finishes on the old bucket). Every backend sharing the buckets
// (NewSharedBudget) takes the new limits with them, as they must have the
// same; key is the shared key of the new limits (the old key is
// forgotten), "" for a budget of its own.
func (b *Budget) Retune(key string, limits, defaults map[string]RateLimit) {
	s := b.buckets()
	if s == nil {
		return
	}
	shared.Lock()
	defer shared.Unlock()
	s.apis.Store(newAPIs(limits, defaults))
	if s.key != "" && shared.m[s.key].Value() == s {
		delete(shared.m, s.key)
	}
	if key != "" {
		if other := shared.m[key].Value(); other == nil || other == s {
			shared.m[key] = weak.Make(s)
		} else {
			// Another live backend's budget holds the key's buckets: one
			// the same reload built (added, or rebuilt) before this
			// retune, with the new limits, while this one still had the
			// old key. Their tokens are this one's too: backends of one
			// account take from one set of buckets however the config
			// got there. It moves onto them, one of their sharers (the
			// rate gauge shows their slow-downs under it, and they live
			// as long as it does, so a backend of the key added later
			// finds them). Before, each kept its own, and together they
			// had twice the account's bucket
			// (TestReview64SharedBudgetAfterRetuneAndNewSharer,
			// TestReview64bJoinedThenHolderRemovedThenReadded,
			// TestReview64bJoinedGaugeShowsTheSharedSlowDown).
			b.set.Store(other)
			s.leave(b)
			b.join()
			s = other
		}
	}
	s.key = key
	// The rate gauge shows each bucket's new ceiling, under every backend
	// sharing the buckets; a bucket turned off has none.
	for api := range defaults {
		s.publish(api, false)
		s.publish(api, true)
	}
}

// shared holds the buckets of NewSharedBudget by key, weakly: the buckets
// go when no live backend's budget holds them (a reload that drops every
// backend of the key starts with full buckets).
var shared = struct {
	sync.Mutex
	m map[string]weak.Pointer[buckets]
}{m: map[string]weak.Pointer[buckets]{}}

// NewSharedBudget is NewBudget for a cloud that throttles per account (AWS:
// per account and region): every live budget made with the same key takes
// its tokens from the same buckets, so two backends in one account together
// stay within the share one would. Each counts its waits and calls under
// its own backend name. The buckets are made with the limits of the first
// budget of the key; backends sharing them must be configured with the
// same limits (the backend's CrossValidate refuses others).
func NewSharedBudget(backend, key string, limits, defaults map[string]RateLimit) *Budget {
	shared.Lock()
	defer shared.Unlock()
	if b := shared.m[key].Value(); b != nil {
		return newBudgetOn(backend, b)
	}
	b := newBuckets(limits, defaults)
	b.key = key
	shared.m[key] = weak.Make(b)
	for k, p := range shared.m {
		if p.Value() == nil {
			delete(shared.m, k)
		}
	}
	return newBudgetOn(backend, b)
}

// Backend is the name the budget counts under ("" for a nil budget).
func (b *Budget) Backend() string {
	if b == nil {
		return ""
	}
	return b.backend
}

// Observe records one request to api (a mutation or not) and its
// outcome, and adapts the bucket it took its token from to the answer
// (ModeAdaptive): a throttled outcome slows it down, any other speeds it
// back up towards its ceiling.
func (b *Budget) Observe(api, action string, write bool, outcome string, took time.Duration) {
	if b == nil {
		return
	}
	Observe(b.backend, api, action, outcome, took)
	a := b.api(api)
	if a == nil {
		return
	}
	if a.bucket(action, write).answered(outcome == OutcomeThrottled) || a.perAction(write) && a.slowed(write) {
		b.buckets().publish(api, write)
	}
}

// Wait takes one token of api's read or write bucket, waiting for it as
// long as ctx allows. An API the budget does not know is not limited. The
// time waited is counted in budget_wait_seconds_total however the wait
// ends, a wait cut short by ctx included. A wait that ctx ends is an
// error wrapping ctx's error; one that would pass ctx's deadline (Wait
// then returns at once) wraps ErrPastDeadline: the caller's own end,
// never the cloud's answer.
//
// A mutation (write) is put to the process's mutation gate
// (SetMutationGate) before its token, and again after a wait for it (the
// lease may run out while it waits; the token it waited for then goes
// back to the bucket): a refusal returns an error wrapping
// ErrMutationRefused, and the call must not be sent. Reads are not gated.
func (b *Budget) Wait(ctx context.Context, api string, write bool) error {
	return b.WaitAction(ctx, api, "", write)
}

// WaitAction is Wait for a request of a named action: where the API keeps
// a bucket per action (AWS's EC2, ELBv2's mutations), it takes a token of
// action's own bucket.
func (b *Budget) WaitAction(ctx context.Context, api, action string, write bool) error {
	if !write {
		_, err := b.take(ctx, api, action, false)
		return err
	}
	if err := checkGate(ctx, b.Backend(), api); err != nil {
		return err
	}
	bk := b.bucket(api, action, true)
	if bk == nil {
		return nil
	}
	if bk.recover() {
		b.buckets().publish(api, true)
	}
	l := bk.lim
	if l.Allow() {
		return nil
	}
	// Reserved rather than waited for, so that a refusal once the token
	// is due gives it back: the refused call sends nothing.
	start := time.Now()
	r := l.ReserveN(start, 1)
	if !r.OK() {
		return fmt.Errorf("waiting for the %s API budget of backend %q: rate: Wait(n=1) exceeds the limiter's burst (%w)", api, b.backend, ErrPastDeadline)
	}
	due := start.Add(r.DelayFrom(start))
	if d, ok := ctx.Deadline(); ok && d.Before(due) {
		r.CancelAt(start)
		return fmt.Errorf("waiting for the %s API budget of backend %q: rate: Wait(n=1) would exceed context deadline (%w)", api, b.backend, ErrPastDeadline)
	}
	err := Sleep(ctx, due.Sub(start))
	waitSeconds.WithLabelValues(b.backend, api).Add(time.Since(start).Seconds())
	if err != nil {
		r.Cancel()
		return fmt.Errorf("waiting for the %s API budget of backend %q: %w", api, b.backend, err)
	}
	if err := checkGate(ctx, b.Backend(), api); err != nil {
		r.CancelAt(due) // the token it was due, back to the bucket
		return err
	}
	return nil
}

// WaitSession is Wait for a mutation that changes only the client's own
// session with the cloud (a login, a logout): it takes a token of api's
// write bucket (action's, where the API keeps one per action: the bucket
// Observe adapts for the same action) but is not gated, so that a standby
// replica can keep the session its reads need.
func (b *Budget) WaitSession(ctx context.Context, api, action string) error {
	_, err := b.take(ctx, api, action, true)
	return err
}

// take takes one token of api's read or write bucket (see Wait), and
// reports whether it had to wait for it.
func (b *Budget) take(ctx context.Context, api, action string, write bool) (bool, error) {
	bk := b.bucket(api, action, write)
	if bk == nil {
		return false, nil
	}
	if bk.recover() {
		b.buckets().publish(api, write)
	}
	l := bk.lim
	if l.Allow() {
		return false, nil
	}
	start := time.Now()
	err := l.Wait(ctx)
	waitSeconds.WithLabelValues(b.backend, api).Add(time.Since(start).Seconds())
	if err == nil {
		return true, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return true, fmt.Errorf("waiting for the %s API budget of backend %q: %w", api, b.backend, ctxErr)
	}
	// rate.Limiter refuses at once a wait that would pass the deadline.
	return true, fmt.Errorf("waiting for the %s API budget of backend %q: %w (%w)", api, b.backend, err, ErrPastDeadline)
}

// ErrPastDeadline is the error a Budget's Wait wraps when the caller's
// deadline comes before the next token: it is context.DeadlineExceeded
// (errors.Is), for the wait is the caller's own deadline, not the cloud's
// answer.
var ErrPastDeadline = pastDeadline{}

type pastDeadline struct{}

func (pastDeadline) Error() string { return "the next token comes after the caller's deadline" }

// Is makes ErrPastDeadline a context.DeadlineExceeded.
func (pastDeadline) Is(target error) bool { return target == context.DeadlineExceeded } //nolint:errorlint // a sentinel.

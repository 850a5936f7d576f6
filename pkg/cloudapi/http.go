package cloudapi

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// HTTP retry defaults for throttling answers (429, or 503 with
// Retry-After): the attempts after the first, and the backoff's cap.
const (
	DefaultHTTPRetries    = 5
	DefaultHTTPMaxBackoff = 20 * time.Second
	httpBaseBackoff       = 500 * time.Millisecond
)

// Endpoint names the API of the requests under one URL prefix.
type Endpoint struct {
	// Prefix is the service's endpoint URL ("https://octavia:9876/v2.0/").
	Prefix string
	// API is the budget's name for it ("load-balancer").
	API string
}

// Transport is an http.RoundTripper for the clouds spoken over plain HTTP
// (OpenStack, vCenter): each request waits for a token of its API's
// bucket (reads are GET and HEAD, or what Mutating says), is counted, and
// a throttling answer (429, or 503 with Retry-After) is retried after the
// time the server asked for, or an exponential backoff with full jitter,
// while attempts and the request's context allow. A request whose body
// cannot be replayed is not retried.
type Transport struct {
	Next   http.RoundTripper
	Budget *Budget
	// DefaultAPI names requests under no endpoint; "" leaves them
	// unlimited and uncounted (an identity service, version documents),
	// though their mutations, but for Session's, are still put to the
	// mutation gate (refusals count under api APIUnknown).
	DefaultAPI string
	// Mutating overrides the method rule (SOAP, where every call is a
	// POST); nil: every method but GET and HEAD mutates.
	Mutating func(*http.Request) bool
	// Session tells the mutating requests that only open or close the
	// client's session (a login): they take a write token but are not
	// put to the mutation gate (Budget.WaitSession). nil: none.
	Session func(*http.Request) bool
	// Action names a request for calls_total; nil: its method.
	Action func(*http.Request) string
	// Retries and MaxBackoff bound the retries of throttling answers;
	// zero takes the defaults.
	Retries    int
	MaxBackoff time.Duration

	endpoints atomic.Pointer[[]Endpoint]
	sleep     func(context.Context, time.Duration) error
}

// SetEndpoints says which URL prefix is which API (set when the service
// catalog is known).
func (t *Transport) SetEndpoints(eps []Endpoint) {
	eps = append([]Endpoint(nil), eps...)
	t.endpoints.Store(&eps)
}

func (t *Transport) api(r *http.Request) string {
	if eps := t.endpoints.Load(); eps != nil {
		u := r.URL.String()
		for _, e := range *eps {
			if strings.HasPrefix(u, e.Prefix) {
				return e.API
			}
		}
	}
	return t.DefaultAPI
}

// RoundTrip sends r within the budget, retrying throttling answers.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	api := t.api(r)
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	if t.Mutating != nil {
		write = t.Mutating(r)
	}
	if api == "" {
		// Unlimited and uncounted, but a mutation under no known
		// endpoint (a service missing from the catalog, a request
		// before it is known) is still put to the mutation gate.
		if write && (t.Session == nil || !t.Session(r)) {
			if err := checkGate(r.Context(), t.Budget.Backend(), APIUnknown); err != nil {
				if r.Body != nil {
					_ = r.Body.Close()
				}
				return nil, err
			}
		}
		return next.RoundTrip(r)
	}
	action := r.Method
	if t.Action != nil {
		action = t.Action(r)
	}
	retries, maxBackoff := t.Retries, t.MaxBackoff
	if retries == 0 {
		retries = DefaultHTTPRetries
	}
	if maxBackoff == 0 {
		maxBackoff = DefaultHTTPMaxBackoff
	}
	ctx := r.Context()
	for attempt := 0; ; attempt++ {
		if err := t.wait(ctx, r, api, action, write); err != nil {
			if r.Body != nil {
				_ = r.Body.Close() // a RoundTripper closes the body, even on errors
			}
			return nil, err
		}
		req := r
		if attempt > 0 {
			var err error
			if req, err = rewind(r); err != nil {
				return nil, err
			}
		}
		start := time.Now()
		resp, err := next.RoundTrip(req)
		took := time.Since(start)
		if err != nil {
			t.Budget.Observe(api, action, write, OutcomeError, took)
			return nil, err
		}
		wait, throttledAnswer := throttleWait(resp, attempt, maxBackoff)
		if !throttledAnswer {
			outcome := OutcomeSuccess
			if resp.StatusCode >= 400 {
				outcome = OutcomeError
			}
			t.Budget.Observe(api, action, write, outcome, took)
			return resp, nil
		}
		t.Budget.Observe(api, action, write, OutcomeThrottled, took)
		if attempt >= retries || (r.Body != nil && r.Body != http.NoBody && r.GetBody == nil) {
			return resp, nil
		}
		drain(resp)
		if err := t.sleepFor(ctx, wait); err != nil {
			return nil, fmt.Errorf("%s %s throttled (HTTP %d), and %w while backing off", r.Method, r.URL.Redacted(), resp.StatusCode, err)
		}
	}
}

// wait takes r's token: a session's request is not gated.
// It takes it from the bucket of the action Observe adapts.
func (t *Transport) wait(ctx context.Context, r *http.Request, api, action string, write bool) error {
	if write && t.Session != nil && t.Session(r) {
		return t.Budget.WaitSession(ctx, api, action)
	}
	return t.Budget.WaitAction(ctx, api, action, write)
}

// APIUnknown is the api a Transport's refused mutation under no known
// endpoint is counted under in multicloud_ccm_fence_refused_cloud_calls_total.
const APIUnknown = "unknown"

// rewind returns r with a fresh copy of its body, for another attempt.
func rewind(r *http.Request) (*http.Request, error) {
	if r.GetBody == nil {
		return r, nil
	}
	body, err := r.GetBody()
	if err != nil {
		return nil, err
	}
	c := r.Clone(r.Context())
	c.Body = body
	return c, nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// throttleWait tells whether resp is a throttling answer (429; 503 only
// with Retry-After, for a plain 503 may mean the request was half done)
// and how long to wait: the server's Retry-After (seconds or an HTTP
// date), capped at maxBackoff, or an exponential backoff with full jitter.
func throttleWait(resp *http.Response, attempt int, maxBackoff time.Duration) (time.Duration, bool) {
	ra := resp.Header.Get("Retry-After")
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
	case resp.StatusCode == http.StatusServiceUnavailable && ra != "":
	default:
		return 0, false
	}
	return RetryWait(attempt, ra, maxBackoff), true
}

// RetryWait is how long to wait before retrying a throttling answer to
// attempt (0 for the first): the server's Retry-After (delay-seconds or an
// HTTP date; "" for none), capped at maxBackoff, or else an exponential
// backoff from 500 ms with full jitter, capped at maxBackoff. For clients
// that see the answer below an SDK (vSphere's SOAP calls).
func RetryWait(attempt int, retryAfter string, maxBackoff time.Duration) time.Duration {
	if d, ok := parseRetryAfter(retryAfter, time.Now()); ok {
		return min(d, maxBackoff)
	}
	backoff := min(httpBaseBackoff<<min(attempt, 10), maxBackoff)
	return time.Duration(rand.Int64N(int64(backoff)) + 1) //nolint:gosec // Jitter, not a secret.
}

// parseRetryAfter reads Retry-After: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

func (t *Transport) sleepFor(ctx context.Context, d time.Duration) error {
	if t.sleep != nil {
		return t.sleep(ctx, d)
	}
	return Sleep(ctx, d)
}

// Sleep waits d, or until ctx is done (its error then): the wait before a
// retry.
func Sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

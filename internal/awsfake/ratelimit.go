package awsfake

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Bucket is one of AWS's API token buckets: it holds at most Capacity
// tokens and gets Refill tokens back a second; each request takes one, and
// a request finding it empty is throttled.
type Bucket struct {
	Capacity float64
	Refill   float64
}

// RateLimits are the buckets of the account, as AWS documents them:
//   - EC2 (EC2 API reference, "Request throttling"): one bucket per
//     action; non-mutating actions 100 tokens refilled at 20 a second,
//     mutating actions 200 refilled at 5. Answer: 503 RequestLimitExceeded.
//   - ELBv2 (ELB user guide, "Request throttling for the ELB API"): one
//     bucket for every Describe* action, 40 tokens refilled at 10 a second;
//     mutations here take one bucket per action (the guide groups them),
//     20 tokens refilled at 2. Answer: 400 Throttling, "Rate exceeded".
type RateLimits struct {
	EC2Read, EC2Write     Bucket
	ELBv2Read, ELBv2Write Bucket
}

// AWSRateLimits are the documented defaults of RateLimits.
var AWSRateLimits = RateLimits{
	EC2Read:    Bucket{Capacity: 100, Refill: 20},
	EC2Write:   Bucket{Capacity: 200, Refill: 5},
	ELBv2Read:  Bucket{Capacity: 40, Refill: 10},
	ELBv2Write: Bucket{Capacity: 20, Refill: 2},
}

// tokens is a bucket's state.
type tokens struct {
	left float64
	at   time.Time
}

// SetRateLimits turns AWS's throttling on with the given buckets (each
// starts full), or off with nil. Off is the default: most tests are about
// something else.
func (s *Server) SetRateLimits(l *RateLimits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimits = l
	s.buckets = map[string]*tokens{}
}

// Throttled returns how many requests the rate limits (SetRateLimits)
// refused.
func (s *Server) Throttled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.throttled
}

// bucketKey is the AWS bucket a request of action takes its token from,
// "" for an API without buckets here: EC2's are per action, ELBv2's
// one for every Describe* and one per mutating action.
func bucketKey(action, version string) string {
	switch version {
	case ec2Version:
		return "ec2/" + action
	case elbv2Version:
		if IsMutating(action) {
			return "elbv2/" + action
		}
		return "elbv2/describe"
	}
	return ""
}

// bucket is the Bucket of a bucketKey.
func (l *RateLimits) bucket(key string) Bucket {
	api, action, _ := strings.Cut(key, "/")
	switch {
	case api == "ec2" && IsMutating(action):
		return l.EC2Write
	case api == "ec2":
		return l.EC2Read
	case action == "describe":
		return l.ELBv2Read
	}
	return l.ELBv2Write
}

// BucketOf returns the key and the Bucket of l that a request of action
// to api ("ec2" or "elbv2") takes its token from.
func (l RateLimits) BucketOf(api, action string) (string, Bucket) {
	version := map[string]string{"ec2": ec2Version, "elbv2": elbv2Version}[api]
	key := bucketKey(action, version)
	return key, l.bucket(key)
}

// BucketCalls returns the requests (first attempts: the calls) the fake
// received, by the AWS bucket each takes its token from ("ec2/ACTION",
// "elbv2/describe", "elbv2/ACTION"), whether the rate limits are on or
// not.
func (s *Server) BucketCalls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.bucketCalls)
}

// Least returns the least time the buckets of l let calls (BucketCalls)
// through, each bucket full at the start: the busiest bucket's calls
// beyond its capacity at its refill rate; and that bucket's key. It is
// the time AWS's own throttling allows for them, whatever the client.
func (l RateLimits) Least(calls map[string]int) (time.Duration, string) {
	var least time.Duration
	var by string
	for _, key := range slices.Sorted(maps.Keys(calls)) {
		b := l.bucket(key)
		if b.Refill <= 0 {
			continue
		}
		d := time.Duration(max(0, float64(calls[key])-b.Capacity) / b.Refill * float64(time.Second))
		if d > least {
			least, by = d, key
		}
	}
	return least, by
}

// rateLimited takes a token for the request, or returns the throttling
// error when its bucket is empty. The caller holds s.mu.
func (s *Server) rateLimited(action, version string, now time.Time) *Error {
	if s.rateLimits == nil {
		return nil
	}
	key := bucketKey(action, version)
	if key == "" {
		return nil
	}
	b := s.rateLimits.bucket(key)
	t := s.buckets[key]
	if t == nil {
		t = &tokens{left: b.Capacity, at: now}
		s.buckets[key] = t
	}
	t.left = min(b.Capacity, t.left+now.Sub(t.at).Seconds()*b.Refill)
	t.at = now
	if t.left < 1 {
		s.throttled++
		return &Error{Status: http.StatusBadRequest, Code: "Throttling", Message: "Rate exceeded"}
	}
	t.left--
	return nil
}

package awsfake

import (
	"net/http"
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

// rateLimited takes a token for the request, or returns the throttling
// error when its bucket is empty. The caller holds s.mu.
func (s *Server) rateLimited(action, version string, now time.Time) *Error {
	if s.rateLimits == nil {
		return nil
	}
	var key string
	var b Bucket
	switch version {
	case ec2Version:
		key, b = "ec2/"+action, s.rateLimits.EC2Read
		if IsMutating(action) {
			b = s.rateLimits.EC2Write
		}
	case elbv2Version:
		key, b = "elbv2/describe", s.rateLimits.ELBv2Read
		if IsMutating(action) {
			key, b = "elbv2/"+action, s.rateLimits.ELBv2Write
		}
	default:
		return nil
	}
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

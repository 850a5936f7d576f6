// Package limits is the configuration of a backend's client-side API
// budget: the RateLimit of one API family, its defaults and its
// validation. Package cloudapi, which keeps the budget, aliases these
// names.
//
// It imports the standard library and apimachinery's field errors only,
// so that a backend's config section can be parsed and fuzzed without
// cloudapi's metrics (component-base) and SDK middleware: hack/fuzz.sh
// compiles every dependency of a fuzz target's test binary with the
// fuzzer's instrumentation.
package limits

import (
	"math"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Off is the qps or qpsWrite that turns a bucket off: its requests are
// counted but never wait.
const Off = -1

// Modes of a bucket (RateLimit.Mode).
const (
	// ModeAdaptive: the configured rate is a ceiling. The bucket starts
	// there, halves its rate when the cloud throttles a request anyway
	// (the account's bucket is spent by someone else too), and climbs
	// back by a tenth of the ceiling for each second without throttling.
	// The default.
	ModeAdaptive = "adaptive"
	// ModeFixed: the configured rate, whatever the cloud answers; a
	// throttled request is only retried.
	ModeFixed = "fixed"
)

// RateLimit is one API family's client-side budget: reads (qps, bucket)
// and mutations (qpsWrite, bucketWrite). A zero field takes the backend's
// default for that API; qps or qpsWrite -1 (Off) turns that bucket off.
type RateLimit struct {
	// QPS is the sustained rate of reads, requests a second.
	QPS float64 `json:"qps,omitempty"`
	// Bucket is the burst of reads: the bucket's size. 0 takes the
	// backend's default, or twice qps where the backend has none.
	Bucket int `json:"bucket,omitempty"`
	// QPSWrite is the sustained rate of mutating requests.
	QPSWrite float64 `json:"qpsWrite,omitempty"`
	// BucketWrite is the burst of mutating requests.
	BucketWrite int `json:"bucketWrite,omitempty"`
	// Mode is adaptive (ModeAdaptive, the default: the rates are
	// ceilings, and each bucket slows down when the cloud throttles
	// anyway and climbs back when it stops) or fixed (ModeFixed).
	Mode string `json:"mode,omitempty"`

	// PerActionReads and PerActionWrites are not configured: a
	// backend's defaults set them where its cloud keeps one bucket per
	// action (EC2 for every action, ELBv2 for its mutations), and the
	// API's rates then apply to each action's bucket, as the cloud's
	// own do. Otherwise one bucket holds every read (or mutation) of
	// the API.
	PerActionReads  bool `json:"-"`
	PerActionWrites bool `json:"-"`
}

// WithDefaults returns l with each zero field taken from def.
func (l RateLimit) WithDefaults(def RateLimit) RateLimit {
	if l.QPS == 0 {
		l.QPS = def.QPS
	}
	if l.Bucket == 0 {
		l.Bucket = def.Bucket
	}
	if l.QPSWrite == 0 {
		l.QPSWrite = def.QPSWrite
	}
	if l.BucketWrite == 0 {
		l.BucketWrite = def.BucketWrite
	}
	if l.Mode == "" {
		l.Mode = def.Mode
	}
	if l.Mode == "" {
		l.Mode = ModeAdaptive
	}
	l.PerActionReads, l.PerActionWrites = def.PerActionReads, def.PerActionWrites
	return l
}

// Validate checks the settings of one API (path is its place in the
// config, for the error): a rate is positive, 0 (the default) or -1 (off);
// a bucket is positive or 0 (the default).
func (l RateLimit) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, r := range []struct {
		name string
		v    float64
	}{{"qps", l.QPS}, {"qpsWrite", l.QPSWrite}} {
		if r.v < 0 && r.v != Off || math.IsNaN(r.v) || math.IsInf(r.v, 0) {
			errs = append(errs, field.Invalid(path.Child(r.name), r.v, "must be a positive rate (requests a second), 0 for the default, or -1 to turn the bucket off"))
		}
	}
	for _, b := range []struct {
		name string
		v    int
	}{{"bucket", l.Bucket}, {"bucketWrite", l.BucketWrite}} {
		if b.v < 0 {
			errs = append(errs, field.Invalid(path.Child(b.name), b.v, "must be a positive number of requests, or 0 for the default"))
		}
	}
	if l.Mode != "" && l.Mode != ModeAdaptive && l.Mode != ModeFixed {
		errs = append(errs, field.NotSupported(path.Child("mode"), l.Mode, []string{ModeAdaptive, ModeFixed}))
	}
	return errs
}

// ValidateLimits checks every API of a backend's rateLimits section
// against the APIs the backend has (the keys of defaults).
func ValidateLimits(limits map[string]RateLimit, defaults map[string]RateLimit, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, api := range sortedKeys(limits) {
		if _, ok := defaults[api]; !ok {
			errs = append(errs, field.NotSupported(path.Key(api), api, sortedKeys(defaults)))
			continue
		}
		errs = append(errs, limits[api].Validate(path.Key(api))...)
	}
	return errs
}

func sortedKeys(m map[string]RateLimit) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

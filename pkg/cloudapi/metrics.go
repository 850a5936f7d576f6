package cloudapi

import (
	"time"

	"k8s.io/component-base/metrics"

	"github.com/multicloud-ccm/multicloud-ccm/internal/metric"
)

// Outcomes of one request, the outcome label of calls_total.
const (
	OutcomeSuccess   = "success"
	OutcomeError     = "error"
	OutcomeThrottled = "throttled"
)

var (
	calls = metric.CounterVec("cloud_api", "calls_total",
		"Requests a backend sent to its cloud, each attempt counted, by backend, api (ec2, elbv2, compute, load-balancer, network, vcenter, ...), action (the API action, or the HTTP method) and outcome (success, error, throttled).",
		"backend", "api", "action", "outcome")
	throttled = metric.CounterVec("cloud_api", "throttled_total",
		"Requests the cloud answered with throttling (Throttling, RequestLimitExceeded, HTTP 429 or 503), by backend and api; each is retried with backoff while attempts are left.",
		"backend", "api")
	duration = metric.HistogramVec("cloud_api", "call_duration_seconds",
		"Duration of a backend's requests to its cloud, each attempt, by backend and api.",
		metrics.ExponentialBuckets(0.005, 2, 14), "backend", "api")
	waitSeconds = metric.CounterVec("cloud_api", "budget_wait_seconds_total",
		"Time a backend's requests waited for a token of its client-side API budget, by backend and api.",
		"backend", "api")
	budgetRate = metric.GaugeVec("cloud_api", "budget_rate",
		"The current rate (requests a second) of an adaptive client-side API budget bucket that the cloud's throttling slowed down, by backend, api and kind (read, write); set when it changes, back at the configured ceiling once the throttling stops.",
		"backend", "api", "kind")
)

// Observe records one request: its outcome and how long it took.
func Observe(backend, api, action, outcome string, took time.Duration) {
	calls.WithLabelValues(backend, api, action, outcome).Inc()
	if outcome == OutcomeThrottled {
		throttled.WithLabelValues(backend, api).Inc()
	}
	duration.WithLabelValues(backend, api).Observe(took.Seconds())
}

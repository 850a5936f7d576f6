package backend

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// operation names one kind of backend call, as it appears in metrics.
type operation int

// The operations a backend call is counted under.
const (
	OpInstanceExists operation = iota
	OpInstanceShutdown
	opInstanceMetadata
	OpGetLoadBalancer
	OpEnsureLoadBalancer
	opUpdateLoadBalancer
	opEnsureLoadBalancerDeleted
	OpListRoutes
	opCreateRoute
	opDeleteRoute
	numOperations
)

var operationNames = [numOperations]string{
	"InstanceExists", "InstanceShutdown", "InstanceMetadata",
	"GetLoadBalancer", "EnsureLoadBalancer", "UpdateLoadBalancer", "EnsureLoadBalancerDeleted",
	"ListRoutes", "CreateRoute", "DeleteRoute",
}

func (o operation) String() string { return operationNames[o] }

const (
	resultSuccess = iota
	resultError
	numResults
)

var resultNames = [numResults]string{"success", "error"}

// BackendRequests and the other call series, registered by RegisterMetrics.
var (
	BackendRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "backend",
		Name:           "requests_total",
		Help:           "Calls the router made to a backend, by backend, operation and result (success or error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"backend", "operation", "result"})

	BackendDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "backend",
		Name:           "request_duration_seconds",
		Help:           "Duration of the router's calls to a backend, by backend and operation.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"backend", "operation"})

	BackendErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "backend",
		Name:           "errors_total",
		Help:           "Calls the router made to a backend that returned an error, by backend, operation and class (throttled, auth, not_found, other); per backend and operation they sum to requests_total{result=\"error\"}.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"backend", "operation", "class"})

	registerOnce sync.Once
)

// RegisterMetrics registers the backend call and health series, once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(BackendRequests, BackendDuration, BackendErrors)
	})
}

// backendMetrics holds one backend's metric children, resolved once so that
// recording a call allocates nothing.
type backendMetrics struct {
	requests [numOperations][numResults]metrics.CounterMetric
	duration [numOperations]metrics.ObserverMetric
	errors   [numOperations][numErrorClasses]metrics.CounterMetric
}

func newBackendMetrics(backend string) *backendMetrics {
	RegisterMetrics()
	m := &backendMetrics{}
	for op := operation(0); op < numOperations; op++ {
		for res := 0; res < numResults; res++ {
			m.requests[op][res] = BackendRequests.WithLabelValues(backend, op.String(), resultNames[res])
		}
		m.duration[op] = BackendDuration.WithLabelValues(backend, op.String())
		for c := ErrorClass(0); c < numErrorClasses; c++ {
			m.errors[op][c] = BackendErrors.WithLabelValues(backend, op.String(), c.String())
		}
	}
	return m
}

package openstack

import "github.com/multicloud-ccm/multicloud-ccm/internal/metric"

// apiRequests counts the HTTP requests the backend sends to OpenStack's
// services, for operators (the cloud-call budget) and for tests.
var apiRequests = metric.CounterVec("openstack", "api_requests_total",
	"HTTP requests an OpenStack backend sent, by backend, service (compute, load-balancer, network) and kind (read: GET or HEAD; write: any other method). Keystone is not counted.",
	"backend", "service", "kind")

// Package promrules checks the chart's monitoring objects with Prometheus's
// own PromQL parser: every alert expression of the PrometheusRule and every
// query of the Grafana dashboard parses, every duration is one Prometheus
// accepts, and every metric they name is one of multicloud-ccm's own
// (multicloud_ccm_*), which test/e2e/chart then finds in the built binary's
// /metrics. It is its own Go module: github.com/prometheus/prometheus
// requires newer client_golang, otel and grpc than the CCM's module, which
// must not move for a test.
package promrules

package main

import (
	"context"
	"maps"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/controller-manager/pkg/healthz"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/statuspublisher"
)

// backendHealthController is the name of the controller that mounts the
// backends' health check at /healthz/backend-health; it is on by default
// and can be turned off with --controllers=*,-backend-health.
const backendHealthController = "backend-health"

// controllerInitializers are upstream's controllers plus backend-health and
// multicloud-load-balancer (pkg/lbcontroller).
func controllerInitializers() map[string]app.ControllerInitFuncConstructor {
	m := maps.Clone(app.DefaultInitFuncConstructors)
	m[backendHealthController] = app.ControllerInitFuncConstructor{Constructor: startBackendHealth}
	m[lbcontroller.Name] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: lbcontroller.Name},
		Constructor: startLoadBalancerController,
	}
	m[statuspublisher.ControllerName] = statuspublisher.Constructor()
	return m
}

// healthCheckable is the backend-health controller: it runs nothing, and
// hands the controller manager the router's check, which /healthz then
// includes. A readiness probe reads /healthz; a liveness probe excludes it
// with /healthz?exclude=backend-health, so a cloud outage makes the pod
// unready but never restarts it.
type healthCheckable struct{ check healthz.UnnamedHealthChecker }

func (healthCheckable) Name() string { return backendHealthController }

// HealthChecker returns the router's check.
func (h healthCheckable) HealthChecker() healthz.UnnamedHealthChecker { return h.check }

var _ controller.HealthCheckable = healthCheckable{}

func startBackendHealth(_ app.ControllerInitContext, _ *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(context.Context, genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		hc, ok := cloud.(interface {
			BackendHealthChecker() healthz.UnnamedHealthChecker
		})
		if !ok {
			return nil, false, nil
		}
		return healthCheckable{check: hc.BackendHealthChecker()}, true, nil
	}
}

package main

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller"
)

// defaultLoadBalancerResync is --load-balancer-resync-period's default.
const defaultLoadBalancerResync = 10 * time.Minute

// loadBalancerResync is --load-balancer-resync-period.
var loadBalancerResync = defaultLoadBalancerResync

// startLoadBalancerController starts multicloud-ccm's load-balancer
// controller: for the Services with one of the config's load-balancer
// classes always, and for those without a class when upstream's service
// controller is turned off (--controllers=*,-service), so that exactly one
// controller serves each Service.
func startLoadBalancerController(initCtx app.ControllerInitContext, cc *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		lbCloud, ok := cloud.(lbcontroller.Cloud)
		if !ok {
			return nil, false, nil
		}
		if _, ok := cloud.LoadBalancer(); !ok {
			return nil, false, nil
		}
		classless := !upstreamServiceControllerEnabled(cc.ComponentConfig.Generic.Controllers)
		c, err := lbcontroller.New(lbCloud, lbcontroller.Options{
			Client:       cc.ClientBuilder.ClientOrDie(initCtx.ClientName),
			EventClient:  cc.ClientBuilder.ClientOrDie(initCtx.ClientName),
			Services:     cc.SharedInformers.Core().V1().Services(),
			Nodes:        cc.SharedInformers.Core().V1().Nodes(),
			ClusterName:  cc.ComponentConfig.KubeCloudShared.ClusterName,
			Classless:    classless,
			ResyncPeriod: max(loadBalancerResync, 0),
		})
		if err != nil {
			return nil, false, err
		}
		if rc, ok := cloud.(reloadingCloud); ok {
			// A reload that adds a class or changes a class's backend
			// re-syncs its Services.
			rc.w.onApplied(c.Reloaded)
		}
		go c.Run(ctx, int(cc.ComponentConfig.ServiceController.ConcurrentServiceSyncs))
		return nil, true, nil
	}
}

// upstreamServiceControllerEnabled reports whether --controllers runs
// upstream's service controller, under its name or its alias ("service").
func upstreamServiceControllerEnabled(controllers []string) bool {
	for _, name := range []string{names.ServiceLBController, "service"} {
		if !genericcontrollermanager.IsControllerEnabled(name, sets.NewString(), controllers) {
			return false
		}
	}
	return true
}

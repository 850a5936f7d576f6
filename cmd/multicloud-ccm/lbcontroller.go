package main

import (
	"context"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller"
)

// defaultLoadBalancerResync is --load-balancer-resync-period's default.
const defaultLoadBalancerResync = 10 * time.Minute

// defaultServiceSyncs is the binary's --concurrent-service-syncs (upstream:
// 1): load-balancer syncs in flight at once.
const defaultServiceSyncs = 10

var (
	// loadBalancerResync is --load-balancer-resync-period.
	loadBalancerResync = defaultLoadBalancerResync
	// loadBalancerQPS is --load-balancer-kube-api-qps.
	loadBalancerQPS float32
)

// setDefaults makes the binary's defaults the fast path (docs/routing.md,
// "Which controller serves which Service"): multicloud-ccm's own
// load-balancer controller serves the Services without a class too,
// upstream's service controller is disabled by default
// (--controllers=*,service turns it back on, as kube-controller-manager's
// disabled-by-default controllers are turned on), and 10 Services sync at
// once.
func setDefaults(opts *options.CloudControllerManagerOptions) {
	app.ControllersDisabledByDefault.Insert(names.ServiceLBController)
	opts.ServiceController.ConcurrentServiceSyncs = defaultServiceSyncs
}

func addLoadBalancerFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&loadBalancerResync, "load-balancer-resync-period", defaultLoadBalancerResync,
		"How often the multicloud-load-balancer controller re-ensures every load balancer it serves, repairing what was changed out of band (drift repair). 0 turns it off.")
	fs.Float32Var(&loadBalancerQPS, "load-balancer-kube-api-qps", 0,
		"Client-side rate limit (requests a second, burst twice that) of the multicloud-load-balancer controller's requests to the API server. 0: none, as controller-runtime's controllers (MetalLB's among them): the API server's priority and fairness, and --concurrent-service-syncs syncs in flight at most, bound it. --kube-api-qps applies to the other controllers.")
}

// startLoadBalancerController starts multicloud-ccm's load-balancer
// controller: for the Services with one of the config's load-balancer
// classes always, and for those without a class unless upstream's service
// controller runs (--controllers=*,service), so that exactly one
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
		client, err := loadBalancerClient(cc.ClientBuilder, initCtx.ClientName)
		if err != nil {
			return nil, false, err
		}
		eventClient, err := loadBalancerClient(cc.ClientBuilder, initCtx.ClientName)
		if err != nil {
			return nil, false, err
		}
		classless := !upstreamServiceControllerEnabled(cc.ComponentConfig.Generic.Controllers)
		c, err := lbcontroller.New(lbCloud, lbcontroller.Options{
			Client:       client,
			EventClient:  eventClient,
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

// loadBalancerClient is a client of the controller's own, from the client
// builder (so with its service account under
// --use-service-account-credentials), limited by
// --load-balancer-kube-api-qps only.
func loadBalancerClient(b cloudprovider.ControllerClientBuilder, name string) (kubernetes.Interface, error) {
	cfg, err := b.Config(name)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, 0
	if loadBalancerQPS > 0 {
		cfg.QPS, cfg.Burst = loadBalancerQPS, int(2*loadBalancerQPS)
	}
	return kubernetes.NewForConfig(cfg)
}

// upstreamServiceControllerEnabled reports whether --controllers (its
// aliases, such as "service", already replaced by the canonical names)
// runs upstream's service controller, which is disabled by default.
func upstreamServiceControllerEnabled(controllers []string) bool {
	return genericcontrollermanager.IsControllerEnabled(names.ServiceLBController, app.ControllersDisabledByDefault, controllers)
}

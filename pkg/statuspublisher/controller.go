package statuspublisher

import (
	"context"
	"fmt"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// ControllerName is the controller's name in --controllers; it is on by
// default and turned off with --controllers=*,-multicloud-status.
const ControllerName = "multicloud-status"

var _ controller.Interface = (*Publisher)(nil)

// Constructor is the controller's entry for the controller manager's
// initializers. It writes with the router's identity (multicloud-ccm, a
// ServiceAccount in kube-system under --use-service-account-credentials).
func Constructor() app.ControllerInitFuncConstructor {
	return app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: backends.EventComponent},
		Constructor: newInitFunc,
	}
}

// newInitFunc starts the publisher when the cloud provider reports its
// backends' status (the multicloud provider does).
func newInitFunc(initCtx app.ControllerInitContext, cfg *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		src, ok := cloud.(Source)
		if !ok {
			return nil, false, nil
		}
		client, err := cfg.ClientBuilder.Client(initCtx.ClientName)
		if err != nil {
			return nil, true, fmt.Errorf("%s: creating a client: %w", ControllerName, err)
		}
		p := New(client, Namespace(), src)
		go p.Run(ctx)
		return p, true, nil
	}
}

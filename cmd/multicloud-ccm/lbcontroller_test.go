package main

import (
	"testing"

	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cmconfig "k8s.io/controller-manager/config"
)

// TestDefaultControllers: by default upstream's service controller is off
// (our load-balancer controller then serves classless Services too) and
// --controllers=*,service (the alias, replaced by the canonical name when
// the flags are applied) turns it back on; 10 Services sync at once.
func TestDefaultControllers(t *testing.T) {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	setDefaults(opts)
	if got := opts.ServiceController.ConcurrentServiceSyncs; got != defaultServiceSyncs {
		t.Errorf("--concurrent-service-syncs defaults to %d, want %d", got, defaultServiceSyncs)
	}
	if !app.ControllersDisabledByDefault.Has(names.ServiceLBController) {
		t.Errorf("%s is not disabled by default", names.ServiceLBController)
	}
	for _, tc := range []struct {
		controllers []string
		upstream    bool
	}{
		{[]string{"*"}, false},
		{[]string{"*", "service"}, true},
		{[]string{"*", "-service"}, false},
		{[]string{"cloud-node-controller", "multicloud-load-balancer"}, false},
		{[]string{"service"}, true},
	} {
		opts.Generic.Controllers = tc.controllers
		var c cmconfig.GenericControllerManagerConfiguration
		if err := opts.Generic.ApplyTo(&c, app.ControllerNames(controllerInitializers()), app.ControllersDisabledByDefault.List(),
			names.CCMControllerAliases()); err != nil {
			t.Fatalf("--controllers=%v: %v", tc.controllers, err)
		}
		if got := upstreamServiceControllerEnabled(c.Controllers); got != tc.upstream {
			t.Errorf("--controllers=%v: upstream's service controller enabled %v, want %v", tc.controllers, got, tc.upstream)
		}
	}
}

// Command multicloud-ccm is the Kubernetes cloud-controller-manager for
// clusters whose machines live in more than one cloud. It is the upstream
// cloud-controller-manager command with the "multicloud" provider compiled
// in, so every standard flag works; "multicloud-ccm config validate" checks a
// cloud-config file offline.
package main

import (
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format.
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics.
	_ "k8s.io/component-base/metrics/prometheus/version"  // build info metric.
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/router" // registers the "multicloud" provider.
)

func main() {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("Unable to initialise command options: %v", err)
	}
	opts.KubeCloudShared.CloudProvider.Name = "multicloud"
	setDefaults(opts)
	cmd := app.NewCloudControllerManagerCommand(opts, initCloud, controllerInitializers(),
		names.CCMControllerAliases(), providerFlags(), wait.NeverStop)
	cmd.Use = "multicloud-ccm"
	cmd.Short = "Kubernetes cloud-controller-manager for clusters spanning several clouds"
	cmd.Long = `multicloud-ccm is the Kubernetes cloud-controller-manager for clusters whose
machines live in more than one cloud. It routes every node, load-balancer and
route call to the backend (` + strings.Join(backends.Types(), ", ") + `) it concerns.

Run it with --cloud-provider=multicloud --cloud-config=FILE and the usual
cloud-controller-manager flags. Check a cloud-config file offline with:

  multicloud-ccm config validate --cloud-config FILE

See where nodes and load balancers went (read-only, from the API server):

  multicloud-ccm status [--kubeconfig FILE] [-o table|json|yaml]`
	cmd.AddCommand(newConfigCommand(), newStatusCommand())
	cmd.AddCommand(newPlanCommand())
	withProductVersion(cmd, os.Stdout)
	os.Exit(cli.Run(cmd))
}

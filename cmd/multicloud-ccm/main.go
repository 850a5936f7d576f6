package main

import (
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	_ "k8s.io/cloud-provider/controllers/node"
	_ "k8s.io/cloud-provider/controllers/nodelifecycle"
	_ "k8s.io/cloud-provider/controllers/route"
	_ "k8s.io/cloud-provider/controllers/service"
	_ "k8s.io/cloud-provider/fake"
	_ "k8s.io/client-go/kubernetes/fake"
)

func main() {
	o, _ := options.NewCloudControllerManagerOptions()
	cmd := app.NewCloudControllerManagerCommand(o, nil, app.DefaultInitFuncConstructors, names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	os.Exit(cli.Run(cmd))
}

package main

import (
	"fmt"
	"os"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app/config"
)

// initCloud builds the provider named by --cloud-provider from
// --cloud-config. The upstream command cannot return an error from here, so
// a bad config ends the process with the config's own error message.
func initCloud(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	cloud, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	if err == nil && cloud == nil {
		err = fmt.Errorf("cloud provider %q is not compiled into this binary; use --cloud-provider=multicloud", shared.Name)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Cannot start the cloud provider: %v\n", err)
		os.Exit(1)
	}
	return cloud
}

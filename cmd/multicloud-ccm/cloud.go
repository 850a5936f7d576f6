package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app/config"
	cliflag "k8s.io/component-base/cli/flag"

	mcconfig "github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// reloadPeriod is --cloud-config-reload-period.
var reloadPeriod = defaultReloadPeriod

// providerFlags are the flags multicloud-ccm adds to upstream's.
func providerFlags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("multicloud")
	addProviderFlags(fs)
	return fss
}

func addProviderFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&reloadPeriod, "cloud-config-reload-period", defaultReloadPeriod,
		"How often --cloud-config and the files it references are checked for changes, which are then applied without a restart. 0 turns reloading off.")
	addLoadBalancerFlags(fs)
	addFenceFlag(fs)
	fs.Var(platformsFlag{}, mcconfig.PlatformsFlag,
		"KEP-5778: the only platforms (providerID schemes, e.g. vsphere,baremetal) whose nodes this CCM serves; the nodes of every other platform belong to another CCM and are left alone. Restricts the config's nodes.platforms further. Default: every platform a backend serves.")
}

// platformsFlag is --cloud-provider-platforms: each value is checked as
// the config's nodes.platforms is, and handed to the router.
type platformsFlag struct{}

func (platformsFlag) String() string {
	if p := router.FlagPlatforms(); p != nil {
		return strings.Join(p, ",")
	}
	return ""
}

func (platformsFlag) Set(v string) error {
	list, err := mcconfig.ParsePlatforms(v)
	if err != nil {
		return err
	}
	router.SetPlatforms(list)
	return nil
}

func (platformsFlag) Type() string { return "strings" }

// initCloud puts the clients behind the leader-election fence (with
// --leader-elect) and builds the provider named by --cloud-provider from
// --cloud-config. The upstream command cannot return an error from here, so
// a bad config ends the process with the config's own error message.
func initCloud(c *config.CompletedConfig) cloudprovider.Interface {
	if err := installFence(c); err != nil {
		fmt.Fprintf(os.Stderr, "Cannot start: %v\n", err)
		os.Exit(1)
	}
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	var cloud cloudprovider.Interface
	var err error
	if shared.Name == router.ProviderName {
		cloud, err = newReloadingCloud(shared.CloudConfigFile, max(reloadPeriod, 0))
	} else {
		cloud, err = cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	}
	if err == nil && cloud == nil {
		err = fmt.Errorf("cloud provider %q is not compiled into this binary; use --cloud-provider=multicloud", shared.Name)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Cannot start the cloud provider: %v\n", err)
		os.Exit(1)
	}
	return cloud
}

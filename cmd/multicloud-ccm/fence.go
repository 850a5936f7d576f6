package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/pflag"
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/options"
	"k8s.io/controller-manager/pkg/leadermigration"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/fence"
)

// fenceWrites is --leader-elect-fence.
var fenceWrites = true

func addFenceFlag(fs *pflag.FlagSet) {
	fs.BoolVar(&fenceWrites, "leader-elect-fence", true,
		"With --leader-elect: refuse every write to the API server but the leader-election lease's own, and every mutating cloud call, once this replica's last successful renewal of the lease was sent --leader-elect-lease-duration (less a tenth) ago, so that a leader paused past its lease never writes beside the new one. false turns the fence off.")
}

// installFence puts the writes of every client the controller manager
// builds from c behind a fence on the leader-election lease (pkg/fence),
// when leader election is on, and makes the fence the cloud's mutation
// gate (cloudapi.SetMutationGate: every backend's mutating cloud calls
// pass only while this replica can be sure it leads; it is set before
// the cloud is built, and this is the gate's one owner), and its TookOver
// the takeover clock (cloudapi.SetTakeover). It runs before upstream's Run, which builds
// the elector's client and the controllers' client builder from
// c.Kubeconfig: wrapping that config (shared by pointer with the
// client builder without service-account credentials) reaches them; the
// client builder with service-account credentials holds a copy, so it is
// wrapped too; the events' client, already built, is rebuilt from the
// fenced config. The shared informers' client only reads.
func installFence(c *config.CompletedConfig) error {
	generic := &c.ComponentConfig.Generic
	if !generic.LeaderElection.LeaderElect || !fenceWrites {
		return nil
	}
	opts := fence.Options{
		Namespace:     generic.LeaderElection.ResourceNamespace,
		Name:          generic.LeaderElection.ResourceName,
		LeaseDuration: generic.LeaderElection.LeaseDuration.Duration,
	}
	if leadermigration.Enabled(generic) {
		opts.Exempt = []string{generic.LeaderMigration.LeaderName}
		opts.Migration = generic.LeaderMigration.LeaderName
	}
	f, err := fence.New(opts)
	if err != nil {
		return err
	}
	if err := fence.CheckTimings(opts.LeaseDuration, generic.LeaderElection.RenewDeadline.Duration, generic.LeaderElection.RetryPeriod.Duration); err != nil {
		klog.Warning(err.Error())
	}
	cloudapi.SetMutationGate(f.CheckCloud)
	cloudapi.SetTakeover(f.TookOver)
	c.Kubeconfig.Wrap(f.Wrap)
	c.ClientBuilder = fencedClientBuilder{next: c.ClientBuilder, wrap: f.Wrap}
	client, err := clientset.NewForConfig(restclient.AddUserAgent(c.Kubeconfig, options.CloudControllerManagerUserAgent))
	if err != nil {
		return fmt.Errorf("the events' client behind the leader-election fence: %w", err)
	}
	c.Client = client
	return nil
}

// fencedClientBuilder hands out next's configs and clients behind the
// fence.
type fencedClientBuilder struct {
	next cloudprovider.ControllerClientBuilder
	wrap func(rt http.RoundTripper) http.RoundTripper
}

var _ cloudprovider.ControllerClientBuilder = fencedClientBuilder{}

// Config returns next's config for name, behind the fence.
func (b fencedClientBuilder) Config(name string) (*restclient.Config, error) {
	cfg, err := b.next.Config(name)
	if err != nil {
		return nil, err
	}
	cfg.Wrap(b.wrap)
	return cfg, nil
}

// ConfigOrDie is Config, ending the process on an error.
func (b fencedClientBuilder) ConfigOrDie(name string) *restclient.Config {
	cfg, err := b.Config(name)
	if err != nil {
		klog.Fatal(err)
	}
	return cfg
}

// Client returns a client for name, behind the fence.
func (b fencedClientBuilder) Client(name string) (clientset.Interface, error) {
	cfg, err := b.Config(name)
	if err != nil {
		return nil, err
	}
	return clientset.NewForConfig(cfg)
}

// ClientOrDie is Client, ending the process on an error.
func (b fencedClientBuilder) ClientOrDie(name string) clientset.Interface {
	client, err := b.Client(name)
	if err != nil {
		klog.Fatal(err)
	}
	return client
}

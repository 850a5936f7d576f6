package testutil

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	"k8s.io/component-base/featuregate"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
)

// StartServiceController runs the upstream service controller with workers
// workers against cloud over client, wired as the CCM wires it: a cloud
// that watches objects (cloudprovider.InformerUser) gets the informer
// factory before it starts. It returns the function that stops the
// controller and waits for it (a crash, as far as the cloud can tell); the
// test's cleanup calls it too.
func StartServiceController(t testing.TB, cloud cloudprovider.Interface, client kubernetes.Interface, clusterName string, workers int) (stop func()) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	if u, ok := cloud.(cloudprovider.InformerUser); ok {
		u.SetInformers(factory)
	}
	stopController := RunServiceController(t, cloud, client, factory, clusterName, workers)
	var once sync.Once
	stop = func() { once.Do(func() { stopController(); factory.Shutdown() }) }
	t.Cleanup(stop)
	return stop
}

// RunServiceController is StartServiceController on a factory the caller
// owns and has already handed to cloud, as a test that shares one factory
// between the cloud and other controllers does: it starts factory and waits
// for its caches. Stopping the controller stops the informers started for
// it and leaves factory to the caller.
func RunServiceController(t testing.TB, cloud cloudprovider.Interface, client kubernetes.Interface, factory informers.SharedInformerFactory, clusterName string, workers int) (stop func()) {
	t.Helper()
	ctrl, err := servicecontroller.New(cloud, client, factory.Core().V1().Services(), factory.Core().V1().Nodes(), clusterName, featuregate.NewFeatureGate())
	if err != nil {
		t.Fatalf("service controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { ctrl.Run(ctx, workers, controllersmetrics.NewControllerManagerMetrics("test")) })
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// NewClientBuilder returns a client builder handing out client, as the
// CCM's builder would to a cloud's Initialize.
func NewClientBuilder(client kubernetes.Interface) cloudprovider.ControllerClientBuilder {
	return clientBuilder{client}
}

type clientBuilder struct{ client kubernetes.Interface }

func (b clientBuilder) Config(string) (*restclient.Config, error)   { return &restclient.Config{}, nil }
func (b clientBuilder) ConfigOrDie(string) *restclient.Config       { return &restclient.Config{} }
func (b clientBuilder) Client(string) (kubernetes.Interface, error) { return b.client, nil }
func (b clientBuilder) ClientOrDie(string) kubernetes.Interface     { return b.client }

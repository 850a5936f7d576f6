package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/controller-manager/pkg/clientbuilder"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/fence"
)

// echoServer is an API server that answers every request with its own
// body (201 for a create) and records the writes that reached it.
type echoServer struct {
	mu     sync.Mutex
	writes []string
}

func (s *echoServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodGet {
		s.mu.Lock()
		s.writes = append(s.writes, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
	}
	w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	if r.Method == http.MethodPost {
		w.WriteHeader(http.StatusCreated)
	}
	_, _ = w.Write(body)
}

func (s *echoServer) reached() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.writes...)
}

// completedConfig is upstream's config from the options as the command
// builds it (options.Config, Complete), against srv.
func completedConfig(t *testing.T, url string, leaderElect bool) *config.CompletedConfig {
	t.Helper()
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	setDefaults(opts)
	opts.Master = url
	opts.SecureServing.BindPort = 0
	if opts.WebhookServing != nil {
		opts.WebhookServing.BindPort = 0
	}
	opts.KubeCloudShared.CloudProvider.Name = "multicloud"
	opts.Generic.LeaderElection.LeaderElect = leaderElect
	opts.Generic.LeaderElection.ResourceName = "mccm"
	c, err := opts.Config(app.ControllerNames(controllerInitializers()), app.ControllersDisabledByDefault.List(),
		names.CCMControllerAliases(), app.AllWebhooks, app.DisabledByDefaultWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	return c.Complete()
}

// TestFenceReachesEveryClient: after installFence, the clients upstream's
// Run and the controllers build from the config (the controllers' client
// builder, the one Run builds from the kubeconfig, the events' client)
// refuse writes until the elector's own client (built from the kubeconfig,
// as Run does) acquired the lease; without leader election (or with
// --leader-elect-fence=false) nothing is fenced. The cloud's mutations
// (cloudapi's mutation gate) are fenced alike.
func TestFenceReachesEveryClient(t *testing.T) {
	for _, tc := range []struct {
		name        string
		leaderElect bool
		fenceFlag   bool
		fenced      bool
	}{
		{"leader election", true, true, true},
		{"no leader election", false, true, false},
		{"fence turned off", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &echoServer{}
			ts := httptest.NewServer(srv)
			t.Cleanup(ts.Close)
			c := completedConfig(t, ts.URL, tc.leaderElect)
			fenceWrites = tc.fenceFlag
			t.Cleanup(func() { fenceWrites = true })
			t.Cleanup(func() { cloudapi.SetMutationGate(nil) })
			if err := installFence(c); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			budget := cloudapi.NewBudget("fence-"+tc.name, nil, cloudapi.AWSDefaults)
			cloudWrite := func() error { return budget.Wait(ctx, cloudapi.APIELBv2, true) }
			if err := cloudWrite(); tc.fenced != errors.Is(err, cloudapi.ErrMutationRefused) || tc.fenced != errors.Is(err, fence.ErrFenced) {
				t.Errorf("a cloud mutation before the lease was acquired: %v, want refused %v", err, tc.fenced)
			}
			runBuilder := clientbuilder.SimpleControllerClientBuilder{ClientConfig: c.Kubeconfig}
			clients := map[string]clientset.Interface{
				"controllers' client builder": c.ClientBuilder.ClientOrDie("multicloud-load-balancer"),
				"Run's client builder":        runBuilder.ClientOrDie("cloud-node-controller"),
				"events' client":              c.Client,
			}
			write := func(name string, client clientset.Interface) error {
				_, err := client.CoreV1().Services("default").UpdateStatus(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}, metav1.UpdateOptions{})
				return err
			}
			for name, client := range clients {
				err := write("before", client)
				if tc.fenced != errors.Is(err, fence.ErrFenced) || (!tc.fenced && err != nil) {
					t.Errorf("%s: a write before the lease was acquired: %v, want fenced %v", name, err, tc.fenced)
				}
			}
			if got := srv.reached(); tc.fenced && len(got) != 0 {
				t.Fatalf("fenced writes reached the API server: %v", got)
			}
			if !tc.leaderElect {
				return
			}
			// The elector's lock, built as upstream's leaderElectAndRun does.
			le := c.ComponentConfig.Generic.LeaderElection
			lock, err := resourcelock.NewFromKubeconfig(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
				resourcelock.ResourceLockConfig{Identity: "replica-a_1"}, c.Kubeconfig, le.RenewDeadline.Duration)
			if err != nil {
				t.Fatal(err)
			}
			now := metav1.NewTime(time.Now())
			if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a_1", LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}); err != nil {
				t.Fatalf("the elector's create of the lease: %v", err)
			}
			for name, client := range clients {
				if err := write("after", client); err != nil {
					t.Errorf("%s: a write after the lease was acquired: %v", name, err)
				}
			}
			if err := cloudWrite(); err != nil {
				t.Errorf("a cloud mutation after the lease was acquired: %v", err)
			}
			leases := 0
			for _, w := range srv.reached() {
				if strings.Contains(w, "/"+coordinationv1.GroupName+"/") {
					leases++
				}
			}
			if leases != 1 {
				t.Errorf("the lease's create reached the API server %d times, want 1: %v", leases, srv.reached())
			}
		})
	}
}

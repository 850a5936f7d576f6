package router

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

var errCloudDown = errors.New("connection refused")

func metal(c *fake.Cloud) Backend {
	return Backend{Name: "metal", Type: "baremetal", Scheme: "baremetal", Cloud: c}
}
func vs(c *fake.Cloud) Backend {
	return Backend{Name: "vs", Type: "vsphere", Scheme: "vsphere", Cloud: c}
}
func awsB(name string, c *fake.Cloud) Backend {
	return Backend{Name: name, Type: "aws", Scheme: "aws", Cloud: c}
}

func ignoreUnmanaged(c *config.CloudConfig) { c.Nodes.Unmanaged = config.UnmanagedIgnore }

func withRule(backend, re string) func(*config.CloudConfig) {
	return func(c *config.CloudConfig) {
		rule, err := config.NewNodeRule(backend, re, nil)
		if err != nil {
			panic(err)
		}
		c.Nodes.Rules = append(c.Nodes.Rules, rule)
	}
}

func TestInstanceExists(t *testing.T) {
	tests := []struct {
		name     string
		cfg      *config.CloudConfig
		backends []Backend
		node     *corev1.Node
		want     bool
		wantErr  string
	}{
		{name: "owned and present", backends: []Backend{metal(instanceCloud(true, nil))},
			node: newNode("bm-1", withProviderID("baremetal://bm-1")), want: true},
		{name: "owned and gone", backends: []Backend{metal(instanceCloud(false, nil))},
			node: newNode("bm-1", withProviderID("baremetal://bm-1")), want: false},
		{name: "owning backend errors", backends: []Backend{metal(instanceCloud(false, errCloudDown))},
			node: newNode("bm-1", withProviderID("baremetal://bm-1")), wantErr: "backend metal: InstanceExists: connection refused"},
		{name: "malformed providerID", backends: []Backend{metal(instanceCloud(false, nil))},
			node: newNode("bm-1", withProviderID("bm-1")), wantErr: "spec.providerID: malformed providerID"},
		{name: "unmanaged scheme is an error by default", backends: []Backend{metal(instanceCloud(false, nil))},
			node: newNode("kind-1", withProviderID("kind://docker/kind/kind-1")), wantErr: "no backend owns this providerID scheme"},
		{name: "unmanaged scheme with ignore exists", cfg: testConfig(ignoreUnmanaged), backends: []Backend{metal(instanceCloud(false, nil))},
			node: newNode("kind-1", withProviderID("kind://docker/kind/kind-1")), want: true},
		{name: "no providerID, label hint, backend has it", backends: []Backend{metal(instanceCloud(true, nil)), vs(instanceCloud(true, nil))},
			node: newNode("x", withNodeBackend("metal")), want: true},
		{name: "no providerID, label hint, backend lacks it is an error not false", backends: []Backend{metal(instanceCloud(false, nil))},
			node: newNode("x", withNodeBackend("metal")), wantErr: "has no instance matching it"},
		{name: "no providerID, label names unknown backend", backends: []Backend{metal(instanceCloud(true, nil))},
			node: newNode("x", withNodeBackend("nope")), wantErr: `label multicloud-ccm.io/backend="nope" names no backend`},
		{name: "no providerID, rule picks backend", cfg: testConfig(withRule("metal", "^bm-")),
			backends: []Backend{metal(instanceCloud(true, nil)), vs(instanceCloud(true, nil))},
			node:     newNode("bm-7"), want: true},
		{name: "no providerID, one claimant", backends: []Backend{metal(instanceCloud(false, nil)), vs(instanceCloud(true, nil))},
			node: newNode("x"), want: true},
		{name: "no providerID, two claimants", backends: []Backend{metal(instanceCloud(true, nil)), vs(instanceCloud(true, nil))},
			node: newNode("x"), wantErr: "backends [metal vs] all claim it"},
		{name: "no providerID, no claimant is an error not false", backends: []Backend{metal(instanceCloud(false, nil)), vs(instanceCloud(false, nil))},
			node: newNode("x"), wantErr: "no backend has an instance matching it"},
		{name: "no providerID, a backend errors", backends: []Backend{metal(instanceCloud(true, nil)), vs(instanceCloud(false, errCloudDown))},
			node: newNode("x"), wantErr: "not every backend could be asked"},
		{name: "shared scheme, one has it", backends: []Backend{awsB("aws-a", instanceCloud(false, nil)), awsB("aws-b", instanceCloud(true, nil))},
			node: newNode("i", withProviderID("aws:///us-east-1a/i-1")), want: true},
		{name: "shared scheme, all report gone", backends: []Backend{awsB("aws-a", instanceCloud(false, nil)), awsB("aws-b", instanceCloud(false, nil))},
			node: newNode("i", withProviderID("aws:///us-east-1a/i-1")), want: false},
		{name: "shared scheme, one errors and none has it", backends: []Backend{awsB("aws-a", instanceCloud(false, errCloudDown)), awsB("aws-b", instanceCloud(false, nil))},
			node: newNode("i", withProviderID("aws:///us-east-1a/i-1")), wantErr: "connection refused"},
		{name: "shared scheme, label picks the backend", backends: []Backend{awsB("aws-a", instanceCloud(false, nil)), awsB("aws-b", instanceCloud(true, errCloudDown))},
			node: newNode("i", withProviderID("aws:///us-east-1a/i-1"), withNodeBackend("aws-a")), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg == nil {
				cfg = testConfig()
			}
			r := mustRouter(t, cfg, tt.backends...)
			got, err := r.InstanceExists(context.Background(), tt.node)
			checkErr(t, err, tt.wantErr)
			if err == nil && got != tt.want {
				t.Errorf("InstanceExists = %v, want %v", got, tt.want)
			}
			if err != nil && got {
				t.Errorf("InstanceExists returned true with an error")
			}
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("want error containing %q, got none", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

func TestInstanceShutdown(t *testing.T) {
	down := instanceCloud(true, nil)
	down.NodeShutdown = true
	tests := []struct {
		name    string
		cfg     *config.CloudConfig
		cloud   *fake.Cloud
		node    *corev1.Node
		want    bool
		wantErr bool
	}{
		{name: "running", cloud: instanceCloud(true, nil), node: newNode("bm-1", withProviderID("baremetal://bm-1"))},
		{name: "shut down", cloud: down, node: newNode("bm-1", withProviderID("baremetal://bm-1")), want: true},
		{name: "unmanaged never shut down (ignore)", cfg: testConfig(ignoreUnmanaged), cloud: down, node: newNode("k", withProviderID("kind://k"))},
		{name: "unmanaged never shut down (error)", cloud: down, node: newNode("k", withProviderID("kind://k")), wantErr: true},
		{name: "backend error", cloud: &fake.Cloud{EnableInstancesV2: true, ErrShutdownByProviderID: errCloudDown}, node: newNode("bm-1", withProviderID("baremetal://bm-1")), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg == nil {
				cfg = testConfig()
			}
			r := mustRouter(t, cfg, metal(tt.cloud))
			got, err := r.InstanceShutdown(context.Background(), tt.node)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("InstanceShutdown = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestInstanceMetadata(t *testing.T) {
	withID := func(id string) *fake.Cloud {
		c := instanceCloud(true, nil)
		c.ProviderID = map[typesNodeName]string{"bm-1": id}
		c.Zone = cloudprovider.Zone{FailureDomain: "rack-a", Region: "dc-1"}
		c.AdditionalLabels = map[string]string{"example.com/tier": "gold"}
		return c
	}
	tests := []struct {
		name    string
		cfg     *config.CloudConfig
		cloud   *fake.Cloud
		node    *corev1.Node
		wantID  string
		wantErr string
	}{
		{name: "owned node keeps its providerID", cloud: withID(""), node: newNode("bm-1", withProviderID("baremetal://bm-1")), wantID: ""},
		{name: "node without providerID gets the backend's", cloud: withID("baremetal://bm-1"), node: newNode("bm-1", withNodeBackend("metal")), wantID: "baremetal://bm-1"},
		{name: "backend reporting a foreign scheme is refused", cloud: withID("aws:///z/i-1"), node: newNode("bm-1", withNodeBackend("metal")), wantErr: "want one with scheme baremetal://"},
		{name: "backend reporting no providerID is refused", cloud: withID(""), node: newNode("bm-1", withNodeBackend("metal")), wantErr: "want one with scheme baremetal://"},
		{name: "nil metadata is an error", cloud: &fake.Cloud{EnableInstancesV2: true, OverrideInstanceMetadata: func(context.Context, *corev1.Node) (*cloudprovider.InstanceMetadata, error) { return nil, nil }},
			node: newNode("bm-1", withProviderID("baremetal://bm-1")), wantErr: "returned no metadata"},
		{name: "unmanaged initialised node with ignore: changes nothing", cfg: testConfig(ignoreUnmanaged), cloud: withID(""), node: newNode("k", withProviderID("kind://k")), wantID: "kind://k"},
		{name: "unmanaged uninitialised node with ignore: left for its owner", cfg: testConfig(ignoreUnmanaged), cloud: withID(""), node: newNode("k", withProviderID("kind://k"), uninitialized), wantErr: "leaving it uninitialised"},
		{name: "unmanaged node with error policy", cloud: withID(""), node: newNode("k", withProviderID("kind://k")), wantErr: "no backend owns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg == nil {
				cfg = testConfig()
			}
			r := mustRouter(t, cfg, metal(tt.cloud))
			md, err := r.InstanceMetadata(context.Background(), tt.node)
			checkErr(t, err, tt.wantErr)
			if err != nil {
				if md != nil {
					t.Errorf("metadata %+v returned with an error", md)
				}
				return
			}
			if md == nil {
				t.Fatal("nil metadata without error")
			}
			if md.ProviderID != tt.wantID {
				t.Errorf("ProviderID = %q, want %q", md.ProviderID, tt.wantID)
			}
			if strings.HasPrefix(tt.node.Spec.ProviderID, "kind://") {
				if len(md.NodeAddresses) != 0 || md.Zone != "" || len(md.AdditionalLabels) != 0 {
					t.Errorf("unmanaged node metadata would change the node: %+v", md)
				}
				return
			}
			if md.AdditionalLabels[string(annotation.NodeBackend)] != "metal" || md.AdditionalLabels["example.com/tier"] != "gold" {
				t.Errorf("labels = %v, want backend label and the backend's own", md.AdditionalLabels)
			}
			if md.Zone != "rack-a" || md.Region != "dc-1" {
				t.Errorf("zone/region = %q/%q", md.Zone, md.Region)
			}
		})
	}
}

func TestInstanceMetadataDoesNotMutateBackendLabels(t *testing.T) {
	c := instanceCloud(true, nil)
	c.AdditionalLabels = map[string]string{"a": "b"}
	r := mustRouter(t, testConfig(), metal(c))
	if _, err := r.InstanceMetadata(context.Background(), newNode("bm-1", withProviderID("baremetal://bm-1"))); err != nil {
		t.Fatal(err)
	}
	if len(c.AdditionalLabels) != 1 {
		t.Errorf("backend's label map was changed: %v", c.AdditionalLabels)
	}
}

func TestClaimFanOutMergesConcurrentLookups(t *testing.T) {
	a, b := instanceCloud(false, nil), instanceCloud(true, nil)
	r := mustRouter(t, testConfig(), metal(a), vs(b))
	node := newNode("x")
	done := make(chan error, 10)
	for range 10 {
		go func() {
			ok, err := r.InstanceExists(context.Background(), node)
			if err == nil && !ok {
				err = errors.New("claimed node reported missing")
			}
			done <- err
		}()
	}
	for range 10 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := len(a.Calls) + len(b.Calls); n > 20 {
		t.Errorf("%d backend calls for 10 concurrent lookups", n)
	}
}

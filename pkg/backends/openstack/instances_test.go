package openstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/openstack/osid"
)

const (
	uuidA = "0b9e3f4a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
	uuidB = "1c0f4a5b-2d3e-4f60-9bac-1d2e3f4a5b6c"
	uuidC = "2d1a5b6c-3e4f-4071-acbd-2e3f4a5b6c7d"
	uuidX = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a" // never a server
	// uuidGone is never a server either, for a RegionOne node.
	uuidGone = "8e7d6c5b-4a39-4281-9f5e-4d3c2b1a0f9e"
	// uuidU is a server Nova reports UNKNOWN.
	uuidU = "4f3c7d8e-5061-4293-9edf-4a5b6c7d8e9f"
)

// fakeCloud builds a backend from s (logging in to the fake) the way the
// router does.
func fakeCloud(t testing.TB, s *Settings) *Cloud {
	t.Helper()
	c, err := New(context.Background(), backends.Options{Name: "os", ClusterID: "test", Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	return c.(*Cloud)
}

func standardServers(f *FakeOpenStack) {
	f.AddServer(FakeNovaServer{ID: uuidA, Name: "vm-a", Zone: "az-1", Flavor: "m1.large",
		Addresses: map[string][]string{"private": {"10.0.0.11", "172.24.4.11/floating"}, "public": {"203.0.113.11"}, "storage": {"192.168.50.11"}}, AccessIPv4: "198.51.100.11"})
	f.AddServer(FakeNovaServer{ID: uuidB, Name: "vm-b", Zone: "az-2", Flavor: "m1.small", Status: "SHUTOFF",
		Addresses: map[string][]string{"private": {"10.0.0.12", "fd00::12"}}})
	f.AddServer(FakeNovaServer{ID: uuidC, Name: "twin", Zone: "az-1", Flavor: "m1.small", Addresses: map[string][]string{"private": {"10.0.0.13"}}})
	f.AddServer(FakeNovaServer{ID: "3e2b6c7d-4f50-4182-bdce-3f4a5b6c7d8e", Name: "twin", Zone: "az-1", Flavor: "m1.small", Addresses: map[string][]string{"private": {"10.0.0.14"}}})
}

func addrs(kv ...string) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for i := 0; i < len(kv); i += 2 {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeAddressType(kv[i]), Address: kv[i+1]})
	}
	return out
}

// TestParseProviderIDUserError checks that ParseProviderID answers as
// osid.ParseProviderID (whose tests and fuzz target are there) and makes
// its errors backends.UserErrors with reason InvalidProviderID.
func TestParseProviderIDUserError(t *testing.T) {
	for _, in := range []string{"openstack:///" + uuidA, "openstack://RegionOne/" + uuidA, "openstack:///not-a-uuid", "openstack://RegionOne/", "aws:///us-east-1a/i-0123", ""} {
		t.Run(in, func(t *testing.T) {
			id, region, err := ParseProviderID(in)
			wantID, wantRegion, wantErr := osid.ParseProviderID(in)
			if id != wantID || region != wantRegion || (err == nil) != (wantErr == nil) {
				t.Fatalf("got %q %q %v, osid.ParseProviderID gives %q %q %v", id, region, err, wantID, wantRegion, wantErr)
			}
			if err == nil {
				return
			}
			if err.Error() != "spec.providerID: "+wantErr.Error() {
				t.Errorf("err %q, want spec.providerID: %v", err, wantErr)
			}
			if ue, ok := backends.AsUserError(err); !ok || ue.Reason != "InvalidProviderID" {
				t.Fatalf("err %v is not a backends.UserError with reason InvalidProviderID", err)
			}
		})
	}
}

// TestInstanceMetadata checks what a node gets from its Nova server: the
// providerID exactly as upstream writes it, the flavor name, the zone, the
// region and the address rules.
func TestInstanceMetadata(t *testing.T) {
	tests := []struct {
		name     string
		tweak    func(*Settings)
		node     *corev1.Node
		want     cloudprovider.InstanceMetadata
		wantErr  string
		notFound bool
	}{
		{
			name: "by providerID", node: newNode("vm-a", withProviderID("openstack:///"+uuidA)),
			want: cloudprovider.InstanceMetadata{ProviderID: "openstack:///" + uuidA, InstanceType: "m1.large", Zone: "az-1", Region: "RegionOne",
				NodeAddresses: addrs("InternalIP", "10.0.0.11", "InternalIP", "203.0.113.11", "InternalIP", "192.168.50.11", "ExternalIP", "172.24.4.11", "ExternalIP", "198.51.100.11")},
		},
		{
			name: "regional providerID kept", node: newNode("vm-a", withProviderID("openstack://RegionOne/"+uuidA)),
			want: cloudprovider.InstanceMetadata{ProviderID: "openstack://RegionOne/" + uuidA, InstanceType: "m1.large", Zone: "az-1", Region: "RegionOne",
				NodeAddresses: addrs("InternalIP", "10.0.0.11", "InternalIP", "203.0.113.11", "InternalIP", "192.168.50.11", "ExternalIP", "172.24.4.11", "ExternalIP", "198.51.100.11")},
		},
		{
			name: "by exact name, address rules", node: newNode("vm-a"),
			tweak: func(s *Settings) {
				s.Instances.InternalNetworks = []string{"private"}
				s.Instances.PublicNetworks = []string{"public"}
			},
			want: cloudprovider.InstanceMetadata{ProviderID: "openstack:///" + uuidA, InstanceType: "m1.large", Zone: "az-1", Region: "RegionOne",
				NodeAddresses: addrs("InternalIP", "10.0.0.11", "ExternalIP", "172.24.4.11", "ExternalIP", "203.0.113.11", "ExternalIP", "198.51.100.11")},
		},
		{
			name: "by name, regional providerID", node: newNode("vm-b"), tweak: func(s *Settings) { s.RegionalProviderID = true },
			want: cloudprovider.InstanceMetadata{ProviderID: "openstack://RegionOne/" + uuidB, InstanceType: "m1.small", Zone: "az-2", Region: "RegionOne",
				NodeAddresses: addrs("InternalIP", "10.0.0.12", "InternalIP", "fd00::12")},
		},
		{name: "two servers with the name", node: newNode("twin"), wantErr: "2 servers are named"},
		{name: "no server with the name", node: newNode("ghost"), notFound: true},
		{name: "gone server", node: newNode("old", withProviderID("openstack:///"+uuidX)), notFound: true},
		{name: "other region", node: newNode("vm-a", withProviderID("openstack://RegionTwo/"+uuidA)), wantErr: `region "RegionTwo"`},
		{name: "malformed providerID", node: newNode("vm-a", withProviderID("openstack:///nope")), wantErr: "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFakeOpenStack(t)
			standardServers(f)
			s := f.Settings(t)
			if tt.tweak != nil {
				tt.tweak(s)
			}
			c := fakeCloud(t, s)
			md, err := c.instances.InstanceMetadata(context.Background(), tt.node)
			switch {
			case tt.notFound:
				if !errors.Is(err, cloudprovider.InstanceNotFound) {
					t.Fatalf("err %v, want cloudprovider.InstanceNotFound", err)
				}
				return
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.Is(err, cloudprovider.InstanceNotFound) {
					t.Fatalf("err %v, want one containing %q (and not InstanceNotFound)", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if fmt.Sprint(*md) != fmt.Sprint(tt.want) {
				t.Errorf("metadata\n got %+v\nwant %+v", *md, tt.want)
			}
		})
	}
}

// TestInstanceExistsAndShutdown: only Nova's 404 (or no server by that
// name) is false; SHUTOFF is shutdown; an API error is an error, never
// false.
func TestInstanceExistsAndShutdown(t *testing.T) {
	f := NewFakeOpenStack(t)
	standardServers(f)
	c := fakeCloud(t, f.Settings(t))
	ctx := context.Background()
	tests := []struct {
		node             *corev1.Node
		exists, shutdown bool
	}{
		{node: newNode("vm-a", withProviderID("openstack:///"+uuidA)), exists: true},
		{node: newNode("vm-b", withProviderID("openstack:///"+uuidB)), exists: true, shutdown: true},
		{node: newNode("vm-b"), exists: true, shutdown: true},
		{node: newNode("old", withProviderID("openstack:///"+uuidX)), exists: false},
		{node: newNode("ghost"), exists: false},
	}
	for _, tt := range tests {
		exists, err := c.instances.InstanceExists(ctx, tt.node)
		if err != nil || exists != tt.exists {
			t.Errorf("InstanceExists(%s %s) = %v, %v; want %v, nil", tt.node.Name, tt.node.Spec.ProviderID, exists, err, tt.exists)
		}
		shutdown, err := c.instances.InstanceShutdown(ctx, tt.node)
		if err != nil || shutdown != tt.shutdown {
			t.Errorf("InstanceShutdown(%s) = %v, %v; want %v, nil", tt.node.Name, shutdown, err, tt.shutdown)
		}
	}
	if got := f.CallCount("GET /compute/v2.1/servers/" + uuidX); got == 0 {
		t.Error("a server missing from the listing was declared gone without Nova's 404 for it")
	}
	if _, err := c.instances.InstanceExists(ctx, newNode("twin")); err == nil {
		t.Error("InstanceExists for a name two servers carry: nil error, want one")
	}

	t.Run("Nova errors are errors", func(t *testing.T) {
		f := NewFakeOpenStack(t)
		standardServers(f)
		c := fakeCloud(t, f.Settings(t))
		f.Fail(http.StatusInternalServerError)
		for _, n := range []*corev1.Node{newNode("old", withProviderID("openstack:///"+uuidX)), newNode("ghost"), newNode("vm-a", withProviderID("openstack:///"+uuidA))} {
			if exists, err := c.instances.InstanceExists(ctx, n); err == nil {
				t.Errorf("InstanceExists(%s) during a Nova outage = %v, nil; want an error", n.Name, exists)
			}
			if _, err := c.instances.InstanceMetadata(ctx, n); err == nil || errors.Is(err, cloudprovider.InstanceNotFound) {
				t.Errorf("InstanceMetadata(%s) during a Nova outage: %v, want an error that is not InstanceNotFound", n.Name, err)
			}
		}
	})
	t.Run("a failed listing backs off", func(t *testing.T) {
		f := NewFakeOpenStack(t)
		standardServers(f)
		c := fakeCloud(t, f.Settings(t))
		n := newNode("vm-a", withProviderID("openstack:///"+uuidA))
		f.Fail(http.StatusInternalServerError)
		if _, err := c.instances.InstanceExists(ctx, n); err == nil {
			t.Fatal("InstanceExists during a Nova outage: nil error")
		}
		first := f.Lists.Load()
		for range 5 {
			if _, err := c.instances.InstanceExists(ctx, n); err == nil {
				t.Fatal("InstanceExists during a Nova outage: nil error")
			}
		}
		if l := f.Lists.Load(); l != first {
			t.Errorf("%d list calls after five more lookups within the backoff, want %d", l, first)
		}
		f.Fail(0)
		c.instances.cache.snaps.ForgetFailure() // rather than wait out the backoff
		if exists, err := c.instances.InstanceExists(ctx, n); err != nil || !exists {
			t.Errorf("InstanceExists after the outage = %v, %v; want true", exists, err)
		}
	})
	t.Run("Keystone unreachable is an error", func(t *testing.T) {
		f := NewFakeOpenStack(t)
		s := f.Settings(t)
		f.Server.Teardown()
		c := fakeCloud(t, s)
		if exists, err := c.instances.InstanceExists(ctx, newNode("x", withProviderID("openstack:///"+uuidX))); err == nil {
			t.Errorf("InstanceExists with Keystone down = %v, nil; want an error", exists)
		}
	})
}

// TestServerCache: lookups are served from one bulk, paginated listing;
// concurrent lookups share one listing; a miss refreshes once.
func TestServerCache(t *testing.T) {
	f := NewFakeOpenStack(t)
	for i := range 250 {
		f.AddServer(FakeNovaServer{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Name: fmt.Sprintf("n%d", i), Zone: "az", Flavor: "m1",
			Addresses: map[string][]string{"private": {fmt.Sprintf("10.1.%d.%d", i/200, i%200)}}})
	}
	s := f.Settings(t)
	s.Instances.PageSize = 100
	c := fakeCloud(t, s)
	var wg sync.WaitGroup
	errs := make(chan error, 250)
	for i := range 250 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := newNode(fmt.Sprintf("n%d", i), withProviderID(fmt.Sprintf("openstack:///00000000-0000-4000-8000-%012d", i)))
			if i%2 == 0 {
				n.Spec.ProviderID = ""
			}
			md, err := c.instances.InstanceMetadata(context.Background(), n)
			if err == nil && md.NodeAddresses[0].Address != fmt.Sprintf("10.1.%d.%d", i/200, i%200) {
				err = fmt.Errorf("node n%d got %v", i, md.NodeAddresses)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// 250 servers at 100 a page: pages of 100, 100, 50.
	if lists, gets := f.Lists.Load(), f.Gets.Load(); lists != 3 || gets != 0 {
		t.Errorf("250 concurrent lookups made %d list calls and %d gets, want 3 (one paginated listing) and 0", lists, gets)
	}
	if a := f.Auths.Load(); a != 1 {
		t.Errorf("%d logins, want 1", a)
	}
}

// TestAuthMethods logs in with each configured way: a password file, an
// application credential from the environment, and clouds.yaml; the
// endpoint overrides replace the catalog.
func TestAuthMethods(t *testing.T) {
	f := NewFakeOpenStack(t)
	standardServers(f)
	dir := t.TempDir()
	clouds := filepath.Join(dir, "clouds.yaml")
	writeFile(t, clouds, fmt.Sprintf("clouds:\n  prod:\n    auth:\n      auth_url: %s\n      username: ccm\n      password: s3cret\n      project_name: k8s\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n", f.AuthURL()))
	t.Setenv("TEST_OS_APP_SECRET", "ac-s3cret")
	tests := map[string]string{
		"password":               fmt.Sprintf("auth: {authURL: %s, username: ccm, password: {file: %s}, projectName: k8s}\nregion: RegionOne\n", f.AuthURL(), writeFile(t, filepath.Join(dir, "pw"), "s3cret")),
		"application credential": fmt.Sprintf("auth: {authURL: %s, applicationCredentialID: ac-1, applicationCredentialSecret: {env: TEST_OS_APP_SECRET}}\nregion: RegionOne\n", f.AuthURL()),
		"clouds.yaml":            "auth: {cloudsFile: clouds.yaml, cloud: prod}\nregion: RegionOne\n",
		"endpoint override":      fmt.Sprintf("auth: {cloudsFile: clouds.yaml, cloud: prod}\nregion: RegionOne\nendpoints: {compute: %s}\n", f.ComputeURL()),
	}
	for name, section := range tests {
		t.Run(name, func(t *testing.T) {
			settings, errs := parseSection(yamlJSON(t, section+"loadBalancer: {enabled: false}\n"), nil, dir)
			if len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			c := fakeCloud(t, settings.(*Settings))
			md, err := c.instances.InstanceMetadata(context.Background(), newNode("vm-a"))
			if err != nil {
				t.Fatal(err)
			}
			if md.InstanceType != "m1.large" {
				t.Errorf("instance type %q: the flavor name needs microversion 2.47", md.InstanceType)
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		settings, errs := parseSection(yamlJSON(t, fmt.Sprintf("auth: {authURL: %s, username: ccm, password: {file: %s}, projectName: k8s}\nregion: RegionOne\nloadBalancer: {enabled: false}\n", f.AuthURL(), writeFile(t, filepath.Join(dir, "bad"), "nope"))), nil, dir)
		if len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		c := fakeCloud(t, settings.(*Settings))
		_, err := c.instances.InstanceExists(context.Background(), newNode("x", withProviderID("openstack:///"+uuidX)))
		if err == nil || !strings.Contains(err.Error(), "Keystone") {
			t.Fatalf("err %v, want a Keystone login error", err)
		}
	})
}

// yamlJSON converts a config section written in YAML to the JSON the
// section parser receives from package config.
func yamlJSON(t testing.TB, in string) []byte {
	t.Helper()
	out, err := yaml.YAMLToJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t testing.TB, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigErrors: bad sections are rejected with every problem named by
// its field path.
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, section string
		want          []string
	}{
		{name: "no auth", section: "region: RegionOne\nloadBalancer: {vipSubnetID: 6f1e4f39-9c6a-4d55-8a25-4a4c8c3c2b11}", want: []string{"auth: Required", "auth.authURL: Required"}},
		{name: "two auth methods", section: "auth: {authURL: 'http://k:5000/v3', username: u, password: {env: P}, projectName: p, applicationCredentialID: a, applicationCredentialSecret: {env: S}}\nregion: R\nloadBalancer: {enabled: false}",
			want: []string{"set only one way to log in"}},
		{name: "inline password", section: "auth: {authURL: 'http://k:5000/v3', username: u, password: hunter2, projectName: p}\nregion: R\nloadBalancer: {enabled: false}", want: []string{"password"}},
		{name: "missing region, vip, bad URL and IDs", section: "auth: {authURL: 'keystone', username: u, password: {env: P}, projectName: p}\nendpoints: {compute: 'ftp://x'}\nloadBalancer: {floatingNetworkID: nope}\nroutes: {routerID: r1}",
			want: []string{"region: Required", "auth.authURL: Invalid", "endpoints.compute: Invalid", "loadBalancer.floatingNetworkID: Invalid", "loadBalancer.vipSubnetID: Required", "routes.routerID: Invalid"}},
		{name: "clouds without cloud", section: "auth: {cloudsFile: /c.yaml}\nregion: R\nloadBalancer: {enabled: false}", want: []string{"auth.cloud: Required"}},
		{name: "monitor timeout above delay", section: "auth: {authURL: 'http://k:5000/v3', username: u, password: {env: P}, projectName: p}\nregion: R\nloadBalancer: {vipNetworkID: 6f1e4f39-9c6a-4d55-8a25-4a4c8c3c2b11, monitorDelaySeconds: 2, monitorTimeoutSeconds: 5}",
			want: []string{"loadBalancer.monitorTimeoutSeconds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("P", "x")
			t.Setenv("S", "y")
			_, errs := parseSection(yamlJSON(t, tt.section), nil, t.TempDir())
			msg := errs.ToAggregate()
			if msg == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(msg.Error(), w) {
					t.Errorf("errors %q lack %q", msg, w)
				}
			}
		})
	}
}

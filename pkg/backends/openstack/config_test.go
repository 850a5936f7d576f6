package openstack

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// captureLogs sends klog's output, at the highest verbosity, to a buffer
// until the test ends.
func captureLogs(t *testing.T) *bytes.Buffer {
	t.Helper()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	var buf bytes.Buffer
	for k, v := range map[string]string{"v": "10", "logtostderr": "false", "alsologtostderr": "false"} {
		if err := fs.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		klog.Flush()
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
	})
	return &buf
}

const leakedPassword = "hunter2-Zq9"

// TestAuthURLWithCredentials: a URL carrying user:password (the auth URL,
// an endpoint override, or clouds.yaml's auth_url) is refused, naming the
// field, and the password appears in no error and no log line.
func TestAuthURLWithCredentials(t *testing.T) {
	logs := captureLogs(t)
	base := "auth: {authURL: '%s', username: ccm, password: {env: P}, projectName: k8s}\nregion: RegionOne\nendpoints: {compute: '%s'}\nloadBalancer: {enabled: false}\n"
	tests := []struct {
		name, authURL, compute, field string
	}{
		{name: "user and password", authURL: "https://ccm:" + leakedPassword + "@keystone.example.com:5000/v3", field: "auth.authURL"},
		{name: "not even parseable", authURL: "https://ccm:" + leakedPassword + "%zz@keystone.example.com/v3", field: "auth.authURL"},
		{name: "user only", authURL: "https://" + leakedPassword + "@keystone.example.com/v3", field: "auth.authURL"},
		{name: "endpoint override", authURL: "https://keystone.example.com/v3", compute: "https://nova:" + leakedPassword + "@nova.example.com/v2.1", field: "endpoints.compute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("P", "x")
			_, errs := parseSection(yamlJSON(t, fmt.Sprintf(base, tt.authURL, tt.compute)), nil, t.TempDir())
			err := errs.ToAggregate()
			if err == nil {
				t.Fatal("a URL with credentials was accepted")
			}
			if !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), "must not carry a user name or password") {
				t.Errorf("error %q does not name %s and the rule", err, tt.field)
			}
			if strings.Contains(err.Error(), leakedPassword) {
				t.Errorf("error echoes the password: %q", err)
			}
		})
	}

	t.Run("whole config file", func(t *testing.T) {
		t.Setenv("P", "x")
		file := fmt.Sprintf("apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: c1\nbackends:\n- name: os\n  type: openstack\n  openstack:\n    auth: {authURL: 'https://ccm:%s@keystone.example.com/v3', username: ccm, password: {env: P}, projectName: k8s}\n    region: RegionOne\n    loadBalancer: {enabled: false}\n", leakedPassword)
		_, err := config.Parse([]byte(file), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "backends[0].openstack.auth.authURL") || strings.Contains(err.Error(), leakedPassword) {
			t.Errorf("config.Parse: %v; want an error naming backends[0].openstack.auth.authURL without the password", err)
		}
	})

	t.Run("clouds.yaml", func(t *testing.T) {
		f := NewFakeOpenStack(t)
		dir := t.TempDir()
		authURL := strings.Replace(f.AuthURL(), "://", "://ccm:"+leakedPassword+"@", 1)
		writeFile(t, filepath.Join(dir, "clouds.yaml"), fmt.Sprintf("clouds:\n  prod:\n    auth:\n      auth_url: %s\n      username: ccm\n      password: s3cret\n      project_name: k8s\n", authURL))
		settings, errs := parseSection(yamlJSON(t, "auth: {cloudsFile: clouds.yaml, cloud: prod}\nregion: RegionOne\nloadBalancer: {enabled: false}\n"), nil, dir)
		if len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		c := fakeCloud(t, settings.(*Settings))
		_, err := c.instances.InstanceExists(context.Background(), newNode("x", withProviderID("openstack:///"+uuidX)))
		if err == nil || !strings.Contains(err.Error(), "clouds.prod.auth.auth_url") || strings.Contains(err.Error(), leakedPassword) {
			t.Errorf("InstanceExists: %v; want an error naming clouds.prod.auth.auth_url without the password", err)
		}
		if n := f.Auths.Load(); n != 0 {
			t.Errorf("%d logins with a URL carrying credentials, want 0", n)
		}
	})
	klog.Flush()
	if strings.Contains(logs.String(), leakedPassword) {
		t.Errorf("the password is in the logs:\n%s", logs)
	}
}

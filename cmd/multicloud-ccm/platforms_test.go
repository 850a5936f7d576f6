package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// TestPlatformsFlag: --cloud-provider-platforms (KEP-5778) reaches the
// router, and a bad value stops the command with an error naming the flag
// and each problem.
func TestPlatformsFlag(t *testing.T) {
	t.Cleanup(func() { router.SetPlatforms(nil) })
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	addProviderFlags(fs)
	if err := fs.Parse([]string{"--cloud-provider-platforms=vsphere, baremetal"}); err != nil {
		t.Fatal(err)
	}
	if got := router.FlagPlatforms(); !slices.Equal(got, []string{"vsphere", "baremetal"}) {
		t.Errorf("router's platforms = %v", got)
	}
	if got := fs.Lookup("cloud-provider-platforms").Value.String(); got != "vsphere,baremetal" {
		t.Errorf("flag value = %q", got)
	}
	fs = pflag.NewFlagSet("test", pflag.ContinueOnError)
	addProviderFlags(fs)
	err := fs.Parse([]string{"--cloud-provider-platforms=AWS,,vsphere,vsphere"})
	for _, want := range []string{"cloud-provider-platforms", `"AWS"`, "Required value", `Duplicate value: "vsphere"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

// TestPlatformsFlagCheckedAgainstConfig: a --cloud-provider-platforms
// value naming a platform no configured backend serves (a typo, or a
// backend not in --cloud-config), or one that shares no platform with
// nodes.platforms, would leave every node another CCM's: none initialised,
// with no Warning and nothing logged at the default verbosity. The command
// refuses it as it refuses the same mistake in nodes.platforms, naming the
// flag, the value and the platforms the config serves.
func TestPlatformsFlagCheckedAgainstConfig(t *testing.T) {
	t.Cleanup(func() { router.SetPlatforms(nil) })
	withSchemes := metalOnly[:strings.Index(metalOnly, "backends:")] +
		"nodes:\n  platforms: [metal3]\n  schemes: [{scheme: metal3, backend: metal}]\n" + metalOnly[strings.Index(metalOnly, "backends:"):]
	for _, tc := range []struct {
		name, flag, config string
		want               []string
	}{
		{"typo", "vshpere", metalOnly, []string{"--cloud-provider-platforms", `"vshpere"`, "baremetal"}},
		{"one of two unknown", "baremetal,aws", metalOnly, []string{"--cloud-provider-platforms", `"aws"`, "baremetal"}},
		{"nothing in common with nodes.platforms", "baremetal", withSchemes, []string{"--cloud-provider-platforms", "nodes.platforms", "metal3", "no platform"}},
		{"served", "baremetal", metalOnly, nil},
		{"served, within nodes.platforms", "metal3", withSchemes, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			addProviderFlags(fs)
			if err := fs.Parse([]string{"--cloud-provider-platforms=" + tc.flag}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { router.SetPlatforms(nil) })
			path := filepath.Join(t.TempDir(), "cloud-config.yaml")
			write(t, path, tc.config)
			_, err := newReloadingCloud(path, 0)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("newReloadingCloud: %v", err)
				}
				return
			}
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v does not say %q", err, want)
				}
			}
		})
	}
}

package main

import (
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

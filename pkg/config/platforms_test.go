package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// TestPlatformsParse: nodes.platforms and nodes.schemes (KEP-5778, Cluster
// API's Metal3) read as written.
func TestPlatformsParse(t *testing.T) {
	cfg := mustParse(t, header+"nodes:\n  platforms: [baremetal, metal3]\n  schemes: [{scheme: metal3, backend: metal}]\nbackends:"+metal)
	if !slices.Equal(cfg.Nodes.Platforms, []string{"baremetal", "metal3"}) {
		t.Errorf("platforms = %v", cfg.Nodes.Platforms)
	}
	if len(cfg.Nodes.Schemes) != 1 || cfg.Nodes.Schemes[0] != (config.SchemeAlias{Scheme: "metal3", Backend: "metal"}) {
		t.Errorf("schemes = %+v", cfg.Nodes.Schemes)
	}
	if got := cfg.ConfiguredPlatforms(); !slices.Equal(got, []string{"baremetal", "metal3"}) {
		t.Errorf("ConfiguredPlatforms = %v", got)
	}
	if cfg := mustParse(t, header+"backends:"+metal); cfg.Nodes.Platforms != nil {
		t.Errorf("platforms unset = %#v, want nil (every platform served)", cfg.Nodes.Platforms)
	}
}

// TestPlatformsValidation: every problem of nodes.platforms and
// nodes.schemes at once, each under its path.
func TestPlatformsValidation(t *testing.T) {
	doc := header + `nodes:
  platforms: [baremetal, aws, Bad_Name, baremetal, ""]
  schemes:
  - {scheme: metal3, backend: ghost}
  - {scheme: metal3, backend: metal}
  - {scheme: baremetal, backend: metal}
  - {scheme: "Metal:3", backend: metal}
backends:` + metal
	_, err := config.Parse([]byte(doc), t.TempDir())
	if err == nil {
		t.Fatal("Parse accepted an invalid config")
	}
	for _, want := range []string{
		`nodes.platforms[1]: Unsupported value: "aws": supported values: "baremetal", "metal3"`,
		`nodes.platforms[2]: Invalid value: "Bad_Name": a platform is a providerID scheme`,
		`nodes.platforms[3]: Duplicate value: "baremetal"`,
		`nodes.platforms[4]: Required value`,
		`nodes.schemes[0].backend: Unsupported value: "ghost"`,
		`nodes.schemes[1].scheme: Duplicate value: "metal3"`,
		`nodes.schemes[2].scheme: Invalid value: "baremetal": baremetal:// is the providerID scheme of the baremetal backend type`,
		`nodes.schemes[3].scheme: Invalid value: "Metal:3"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if _, err := config.Parse([]byte(header+"nodes: {platforms: []}\nbackends:"+metal), t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), "nodes.platforms: Required value: list at least one platform") {
		t.Errorf("an empty platforms list: %v", err)
	}
}

// TestParsePlatformsFlag: --cloud-provider-platforms, every problem in one
// error naming the flag.
func TestParsePlatformsFlag(t *testing.T) {
	got, err := config.ParsePlatforms("vsphere, baremetal")
	if err != nil || !slices.Equal(got, []string{"vsphere", "baremetal"}) {
		t.Errorf("ParsePlatforms = %v, %v", got, err)
	}
	_, err = config.ParsePlatforms("vsphere,,AWS,vsphere")
	for _, want := range []string{"--cloud-provider-platforms[1]: Required value", `--cloud-provider-platforms[2]: Invalid value: "AWS"`, `--cloud-provider-platforms[3]: Duplicate value: "vsphere"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

package config_test

import (
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

func TestClassesParse(t *testing.T) {
	cfg := mustParse(t, header+"loadBalancer:\n  classes:\n  - {name: multicloud-ccm.io/metal, backend: metal}\n  - {name: metal, backend: metal}\nbackends:"+metal)
	c, ok := cfg.LoadBalancer.Class("multicloud-ccm.io/metal")
	if !ok || c.Backend != "metal" || len(cfg.LoadBalancer.Classes) != 2 {
		t.Errorf("classes = %+v", cfg.LoadBalancer.Classes)
	}
	if _, ok := cfg.LoadBalancer.Class("metallb.io/metallb"); ok {
		t.Error("a class not listed was found")
	}
}

// TestClassesValidation: every problem of loadBalancer.classes is reported
// at once, each naming the entry's field.
func TestClassesValidation(t *testing.T) {
	doc := header + `loadBalancer:
  classes:
  - {name: multicloud-ccm.io/metal, backend: metal}
  - {name: multicloud-ccm.io/metal, backend: metal}
  - {name: multicloud-ccm.io/x, backend: ghost}
  - {name: "not a class!", backend: metal}
  - {backend: metal}
  - {name: other, backend: metal}
  - {name: multicloud-ccm.io/d, backend: metal, annotations: {"multicloud-ccm.io/address-pool": p, "bad key!": x, "multicloud-ccm.io/load-balancer-backend": other}}
backends:` + metal + `
- name: other
  type: baremetal
  baremetal:
    addressPools:
    - name: p
      addresses: ["198.51.100.0/28"]
`
	_, err := parseErr(t, doc)
	for _, want := range []string{
		`loadBalancer.classes[1].name: Duplicate value: "multicloud-ccm.io/metal"`,
		`loadBalancer.classes[2].backend: Unsupported value: "ghost"`,
		`loadBalancer.classes[3].name: Invalid value: "not a class!": not a valid spec.loadBalancerClass`,
		`loadBalancer.classes[4].name: Required value`,
		`loadBalancer.classes[5].name: Invalid value: "other": is the name of backend "other" but the class is served by "metal"`,
		`loadBalancer.classes[6].annotations[bad key!]: Invalid value: "bad key!": not a valid annotation name`,
		`loadBalancer.classes[6].annotations[multicloud-ccm.io/load-balancer-backend]: Forbidden: the router's own annotation`,
	} {
		if !strings.Contains(err, want) {
			t.Errorf("error does not report %q:\n%s", want, err)
		}
	}
	if strings.Contains(err, "classes[0]") {
		t.Errorf("the valid first entry was reported:\n%s", err)
	}
}

func TestClassesMisspeltKey(t *testing.T) {
	_, err := parseErr(t, header+"loadBalancer:\n  classes:\n  - {name: a.io/b, backnd: metal}\nbackends:"+metal)
	if !strings.Contains(err, "loadBalancer.classes[0].backnd") {
		t.Errorf("misspelt key not reported by path: %s", err)
	}
}

// parseErr parses a document that must be refused and returns the error text.
func parseErr(t *testing.T, doc string) (*config.CloudConfig, string) {
	t.Helper()
	cfg, err := config.Parse([]byte(doc), t.TempDir())
	if err == nil {
		t.Fatalf("Parse accepted it: %+v", cfg)
	}
	return cfg, err.Error()
}

// TestClassesSeveralBackends: a class may name several backends
// (backends), served in that order; backend and backends together, an
// unknown or repeated name, and a negative loadBalancer.drainPeriod are
// each reported, naming the field.
func TestClassesSeveralBackends(t *testing.T) {
	other := `
- name: other
  type: baremetal
  baremetal:
    addressPools:
    - name: p
      addresses: ["198.51.100.0/28"]
`
	cfg := mustParse(t, header+"loadBalancer:\n  drainPeriod: 5m\n  classes:\n  - {name: multicloud-ccm.io/both, backends: [other, metal]}\nbackends:"+metal+other)
	c, _ := cfg.LoadBalancer.Class("multicloud-ccm.io/both")
	if got := strings.Join(c.Targets(), ","); got != "other,metal" {
		t.Errorf("targets = %s, want other,metal", got)
	}
	if d := cfg.LoadBalancer.Drain().String(); d != "5m0s" {
		t.Errorf("drain = %s", d)
	}
	_, err := parseErr(t, header+`loadBalancer:
  drainPeriod: -1s
  classes:
  - {name: multicloud-ccm.io/a, backend: metal, backends: [other]}
  - {name: multicloud-ccm.io/b, backends: [metal, ghost, metal]}
backends:`+metal+other)
	for _, want := range []string{
		`loadBalancer.drainPeriod: Invalid value: "-1s"`,
		`loadBalancer.classes[0].backends: Invalid value`,
		`loadBalancer.classes[1].backends[1]: Unsupported value: "ghost"`,
		`loadBalancer.classes[1].backends[2]: Duplicate value: "metal"`,
	} {
		if !strings.Contains(err, want) {
			t.Errorf("error does not report %q:\n%s", want, err)
		}
	}
}

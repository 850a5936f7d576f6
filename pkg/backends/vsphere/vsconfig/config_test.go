package vsconfig

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// section builds a vsphere section as JSON from a valid base and a tweak.
func section(t *testing.T, tweak func(m map[string]any)) []byte {
	t.Helper()
	m := map[string]any{
		"vcenters": []any{map[string]any{
			"server":      "vc1.example.com",
			"datacenters": []any{"dc1"},
			"username":    map[string]any{"env": "VSPHERE_USER"},
			"password":    map[string]any{"file": "secrets/password"},
		}},
	}
	if tweak != nil {
		tweak(m)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func vc0(m map[string]any) map[string]any { return m["vcenters"].([]any)[0].(map[string]any) }

func TestParseSectionDefaults(t *testing.T) {
	v, errs := ParseSection(section(t, nil), field.NewPath("backends").Index(0).Child("vsphere"), "/etc/ccm")
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	s := v.(*Settings)
	if s.RefreshInterval.Duration != time.Minute || s.RequestTimeout.Duration != 30*time.Second {
		t.Errorf("defaults refreshInterval=%v requestTimeout=%v", s.RefreshInterval, s.RequestTimeout)
	}
	if got := s.VCenters[0].url.String(); got != "https://vc1.example.com/sdk" {
		t.Errorf("server URL %q", got)
	}
	if got := s.VCenters[0].Password.File; got != "/etc/ccm/secrets/password" {
		t.Errorf("password file %q, want it resolved against the config folder", got)
	}
	if len(s.Addresses.IPFamilies) != 1 || s.Addresses.IPFamilies[0] != FamilyIPv4 {
		t.Errorf("ipFamilies %v, want [ipv4]", s.Addresses.IPFamilies)
	}
	if len(s.RateLimits) != 0 {
		t.Errorf("rateLimits %v, want none (the budget's defaults apply)", s.RateLimits)
	}
	v, errs = ParseSection(section(t, func(m map[string]any) {
		m["rateLimits"] = map[string]any{"vcenter": map[string]any{"qps": -1, "qpsWrite": 50, "bucketWrite": 100}}
	}), field.NewPath("vsphere"), "")
	if len(errs) > 0 {
		t.Fatalf("rateLimits off for reads: %v", errs.ToAggregate())
	}
	if got := v.(*Settings).RateLimits["vcenter"]; got.QPS != -1 || got.QPSWrite != 50 || got.BucketWrite != 100 {
		t.Errorf("rateLimits[vcenter] = %+v", got)
	}
}

func TestParseSectionErrors(t *testing.T) {
	tests := []struct {
		name  string
		tweak func(m map[string]any)
		want  []string
	}{
		{"no vcenters", func(m map[string]any) { m["vcenters"] = []any{} }, []string{"vsphere.vcenters: Required"}},
		{"unknown key", func(m map[string]any) { m["zoneCatgory"] = "x" }, []string{`backends[0].vsphere.zoneCatgory: Forbidden: unknown field`}},
		{"inline password", func(m map[string]any) { vc0(m)["password"] = "hunter2" }, []string{"vcenters[0].password", "must be a secret reference", "never written into the config"}},
		{"no server", func(m map[string]any) { vc0(m)["server"] = "" }, []string{"vcenters[0].server", "host name or URL"}},
		{"bad scheme", func(m map[string]any) { vc0(m)["server"] = "ftp://vc" }, []string{"vcenters[0].server", "scheme must be https"}},
		{"plain http", func(m map[string]any) { vc0(m)["server"] = "http://vc1.example.com/sdk" }, []string{"vcenters[0].server", "scheme must be https", `"http"`, "https://vc1.example.com"}},
		{"plain http with port", func(m map[string]any) { vc0(m)["server"] = "HTTP://vc1.example.com:80" }, []string{"vcenters[0].server", "scheme must be https"}},
		{"no datacenters", func(m map[string]any) { delete(vc0(m), "datacenters") }, []string{"vcenters[0].datacenters: Required"}},
		{"empty datacenter", func(m map[string]any) { vc0(m)["datacenters"] = []any{" "} }, []string{"vcenters[0].datacenters[0]"}},
		{"no username", func(m map[string]any) { delete(vc0(m), "username") }, []string{"vcenters[0].username: Required"}},
		{"password file and env", func(m map[string]any) { vc0(m)["password"] = map[string]any{"file": "a", "env": "B"} }, []string{"vcenters[0].password", "only one of file and env"}},
		{"insecure with thumbprint", func(m map[string]any) {
			vc0(m)["insecure"] = true
			vc0(m)["thumbprint"] = strings.Repeat("AB:", 19) + "AB"
		}, []string{"vcenters[0].insecure", "remove insecure"}},
		{"bad thumbprint", func(m map[string]any) { vc0(m)["thumbprint"] = "abc" }, []string{"vcenters[0].thumbprint", "SHA-1 or SHA-256"}},
		{"ca and thumbprint", func(m map[string]any) {
			vc0(m)["caFile"] = "ca.pem"
			vc0(m)["thumbprint"] = strings.Repeat("AB:", 19) + "AB"
		}, []string{"vcenters[0].thumbprint", "only one of caFile and thumbprint"}},
		{"duplicate server", func(m map[string]any) {
			m["vcenters"] = append(m["vcenters"].([]any), vc0(m))
		}, []string{"vcenters[1].server: Duplicate"}},
		{"bad CIDR", func(m map[string]any) {
			m["addresses"] = map[string]any{"internalSubnets": []any{"10.0.0.0/8", "10.1.0.0"}}
		}, []string{"addresses.internalSubnets[1]", "must be a CIDR"}},
		{"bad family", func(m map[string]any) { m["addresses"] = map[string]any{"ipFamilies": []any{"ipv5"}} }, []string{"addresses.ipFamilies[0]", "Unsupported value"}},
		{"short refresh", func(m map[string]any) { m["refreshInterval"] = "100ms" }, []string{"vsphere.refreshInterval", "at least 1s"}},
		{"same categories", func(m map[string]any) { m["zoneCategory"], m["regionCategory"] = "k", "k" }, []string{"vsphere.regionCategory", "must differ"}},
		{"rate limits of an unknown API", func(m map[string]any) { m["rateLimits"] = map[string]any{"soap": map[string]any{"qps": 5}} },
			[]string{`vsphere.rateLimits[soap]: Unsupported value: "soap": supported values: "vcenter"`}},
		{"bad rate limits", func(m map[string]any) {
			m["rateLimits"] = map[string]any{"vcenter": map[string]any{"qps": -3, "bucket": -1, "qpsWrite": -2}}
		}, []string{"vsphere.rateLimits[vcenter].qps: Invalid value: -3", "or -1 to turn the bucket off", "vsphere.rateLimits[vcenter].bucket: Invalid value: -1", "vsphere.rateLimits[vcenter].qpsWrite"}},
		{"every problem at once", func(m map[string]any) {
			vc0(m)["server"] = ""
			m["addresses"] = map[string]any{"excludeSubnets": []any{"x"}}
		}, []string{"vcenters[0].server", "addresses.excludeSubnets[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, errs := ParseSection(section(t, tt.tweak), field.NewPath("backends").Index(0).Child("vsphere"), "/etc/ccm")
			if len(errs) == 0 {
				t.Fatalf("parsed %+v, want errors mentioning %q", v, tt.want)
			}
			msg := errs.ToAggregate().Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// FuzzParse feeds arbitrary documents to the decoder. It must never panic,
// must return either a config or an error, and a config it accepts must
// survive a round trip through YAML unchanged.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(header + "backends:" + metal))
	f.Add([]byte(header + "nodes: {unmanaged: ignore, rules: [{backend: metal, matchLabels: {a: b}}]}\nbackends:" + metal))
	f.Add([]byte(header + "clusterId: x\n"))
	f.Add([]byte("backends: [{name: a, type: baremetal, baremetal: {addressPools: [{name: p, addresses: [10.0.0.1-10.0.0.0]}]}}]"))
	f.Add([]byte("{\"apiVersion\": 1}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse(data, "/etc/multicloud-ccm")
		if (cfg == nil) == (err == nil) {
			t.Fatalf("Parse returned config %v and error %v", cfg != nil, err)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshalling an accepted config: %v", err)
		}
		again, err := config.Parse(out, "/etc/multicloud-ccm")
		if err != nil {
			t.Fatalf("an accepted config, written back, is refused: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(stripSettings(cfg), stripSettings(again)) {
			t.Fatalf("round trip changed the config:\n%s", out)
		}
	})
}

// stripSettings drops the parsed sections, which hold compiled state; the
// raw sections they came from are compared instead.
func stripSettings(c *config.CloudConfig) config.CloudConfig {
	out := *c
	out.Backends = append([]config.Backend(nil), c.Backends...)
	for i := range out.Backends {
		out.Backends[i].Settings = nil
	}
	out.Nodes.Rules = nil
	for _, r := range c.Nodes.Rules {
		nr, _ := config.NewNodeRule(r.Backend, r.NodeNameRegex, r.MatchLabels)
		out.Nodes.Rules = append(out.Nodes.Rules, nr)
	}
	return out
}

package chaos

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/sims/vcsim"
)

// NewRand is the judge's random source: PCG seeded from one number, so
// that a printed seed draws the same sequence again.
func NewRand(seed uint64) *Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) } //nolint:gosec // a replayable test sequence, not a secret.

// Rand is math/rand/v2's generator.
type Rand = rand.Rand

const region = "eu-west-1"

// awsKeyID is the AWS access key ID of generation gen (AWSKeyRotate).
func awsKeyID(gen int) string { return fmt.Sprintf("AKIDCHAOS%04d", gen) }

// The bare-metal pools: each backend's auto-assigned pool, big (a /27) or
// shrunk to its upper half (a /28), and metal's reserved pool (not
// auto-assigned) holding the strangers' addresses.
var (
	metalBig   = netip.MustParsePrefix("192.0.2.0/27")
	metalSmall = netip.MustParsePrefix("192.0.2.16/28")
	// metal2's pool is not in 198.51.100.0/24, where Octavia's noop
	// network driver puts every VIP (198.51.100.1: osNoopVIP).
	metal2Big   = netip.MustParsePrefix("203.0.113.0/27")
	metal2Small = netip.MustParsePrefix("203.0.113.16/28")
	reserved    = netip.MustParsePrefix("192.0.2.64/29")
)

// metalPool is the auto-assigned pool of the bare-metal backend b under c
// (invalid for a backend that is not bare metal).
func (c Config) metalPool(b string) netip.Prefix {
	switch {
	case b == "metal" && c.MetalSmall:
		return metalSmall
	case b == "metal":
		return metalBig
	case b == "metal2" && c.Metal2Small:
		return metal2Small
	case b == "metal2":
		return metal2Big
	}
	return netip.Prefix{}
}

// configured reports whether backend b is in the configuration.
func (c Config) configured(b string) bool {
	return b == "metal" || b == "aws" || (b == "metal2" && c.Metal2) || (b == "os" && c.OS)
}

// drain is the configuration's drain period.
func (c Config) drain() time.Duration {
	d, _ := time.ParseDuration(c.Drain)
	return d
}

// classBackends are the backends of the judge's classes.
var classBackends = map[string][]string{classMetal: {"metal"}, classBoth: {"aws", "metal"}}

// class is the backends of the class name under c, and whether c
// configures it.
func (c Config) class(name string) ([]string, bool) {
	if (name == classMetal && c.NoMetalClass) || (name == classBoth && c.NoBothClass) {
		return nil, false
	}
	bs, ok := classBackends[name]
	return bs, ok
}

// classes are the classes c configures, by their short names.
func (c Config) classes() []string {
	var out []string
	for _, name := range []string{classMetal, classBoth} {
		if _, ok := c.class(name); ok {
			out = append(out, strings.TrimPrefix(name, "chaos.multicloud-ccm.io/"))
		}
	}
	return out
}

// wanted is where a Service of shape s is served under c: its class's
// backends, else its annotation's, else the default, else nowhere. known
// is false when it names a backend c lacks, or a class c does not
// configure (another controller's class now: its load balancers are left
// as they are, and the judge does not judge them).
func (c Config) wanted(s Shape) (backends []string, known bool) {
	switch {
	case s.Type != serviceTypeLB:
		return nil, true
	case s.Class != "":
		var ok bool
		if backends, ok = c.class(s.Class); !ok {
			return nil, false
		}
	case s.Backends != "":
		backends = strings.Split(s.Backends, ",")
	case c.Default != "":
		backends = []string{c.Default}
	}
	for _, b := range backends {
		if !c.configured(b) {
			return backends, false
		}
	}
	return backends, true
}

// drainOf is the drain period a move of s starts under c.
func (c Config) drainOf(s Shape) time.Duration {
	if s.Drain != "" {
		d, _ := time.ParseDuration(s.Drain)
		return d
	}
	return c.drain()
}

// render writes the cloud-config; keyDir holds the AWS credentials' secret
// files (writeKey).
func (c Config) render(cluster, awsURL, vpc, keyDir string, vs vcsim.Backend) string {
	var w strings.Builder
	fmt.Fprintf(&w, "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: %s\nloadBalancer:\n", cluster)
	if c.Default != "" {
		fmt.Fprintf(&w, "  defaultBackend: %s\n", c.Default)
	}
	fmt.Fprintf(&w, "  drainPeriod: %s\n", c.Drain)
	var classes []string
	if !c.NoMetalClass {
		classes = append(classes, fmt.Sprintf("{name: %s, backend: metal}", classMetal))
	}
	if !c.NoBothClass {
		classes = append(classes, fmt.Sprintf("{name: %s, backends: [aws, metal]}", classBoth))
	}
	fmt.Fprintf(&w, "  classes: [%s]\n", strings.Join(classes, ", "))
	w.WriteString("backends:\n- name: metal\n  type: baremetal\n  baremetal:\n    inventory: [")
	for i, n := range metalNodes {
		if i > 0 {
			w.WriteString(", ")
		}
		fmt.Fprintf(&w, "{name: %s, addresses: [{type: InternalIP, address: %s}]}", n, metalNodeIP(i))
	}
	fmt.Fprintf(&w, "]\n    addressPools: [{name: public, addresses: [%q]}, {name: reserved, addresses: [%q], autoAssign: false}]\n",
		c.metalPool("metal").String(), reserved.String())
	fmt.Fprintf(&w, `- name: aws
  type: aws
  aws:
    region: %s
    vpc: %s
    endpoints: {ec2: %q, elbv2: %q, sts: %q}
    credentials:
      accessKeyID: {file: %s}
      secretAccessKey: {file: %s}
    instanceCacheTTL: 1s
    retry: {maxAttempts: 2, maxBackoff: 100ms}
`, region, vpc, awsURL, awsURL, awsURL, filepath.Join(keyDir, "access-key-id"), filepath.Join(keyDir, "secret-access-key"))
	if c.Metal2 {
		fmt.Fprintf(&w, `- name: metal2
  type: baremetal
  baremetal:
    inventory: [{name: bm2-1, addresses: [{type: InternalIP, address: 10.0.9.9}]}]
    addressPools: [{name: edge, addresses: [%q]}]
`, c.metalPool("metal2").String())
	}
	w.WriteString(vs.YAML())
	return w.String()
}

func metalNodeIP(i int) string { return fmt.Sprintf("10.0.0.%d", 11+i) }

// isMetal reports whether b is a bare-metal backend.
func isMetal(b string) bool { return b == "metal" || b == "metal2" }

// sameSet reports whether a and b hold the same names.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

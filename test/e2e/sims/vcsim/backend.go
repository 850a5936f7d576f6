package vcsim

import (
	"fmt"
	"strings"
	"time"
)

// Backend is a type: vsphere backend of a cloud-config pointing at one or
// more simulators. Change its fields, then render it with YAML and pass Env
// to the CCM's environment.
type Backend struct {
	// Name is the backend's name in the config.
	Name string
	// Sims are the vCenters of the backend.
	Sims []*Simulator
	// RefreshInterval is the inventory refresh interval (default 2s, for
	// tests and demos that change VMs and expect the CCM to notice soon).
	RefreshInterval time.Duration
	// RequestTimeout bounds one inventory refresh (default 10s).
	RequestTimeout time.Duration
	// Topology adds zoneCategory and regionCategory (default true from
	// Backend).
	Topology bool
	// PinThumbprint trusts the certificates by thumbprint instead of
	// caFile. (With a thumbprint, each new connection first fails the
	// ordinary verification, which the simulator logs as a TLS handshake
	// error, before the thumbprint is checked.)
	PinThumbprint bool
}

// Backend returns a backend named name for this simulator, with topology.
func (s *Simulator) Backend(name string) Backend {
	return NewBackend(name, s)
}

// NewBackend returns a backend named name whose vCenters are sims (all
// with the same tag category names: those of the first).
func NewBackend(name string, sims ...*Simulator) Backend {
	return Backend{Name: name, Sims: sims, RefreshInterval: 2 * time.Second, RequestTimeout: 10 * time.Second, Topology: true}
}

// YAML renders the entry of the cloud-config's backends list, starting
// "- name: <name>" at column 0. Credentials are read from the environment
// variables Env sets; the TLS certificate is verified with caFile (or
// pinned by thumbprint).
func (b Backend) YAML() string {
	var w strings.Builder
	fmt.Fprintf(&w, "- name: %s\n  type: vsphere\n  vsphere:\n    vcenters:\n", b.Name)
	for i, s := range b.Sims {
		user, password := b.envNames(i)
		fmt.Fprintf(&w, "    - server: %s\n", s.URL)
		fmt.Fprintf(&w, "      datacenters: [%s]\n", Datacenter)
		fmt.Fprintf(&w, "      username: {env: %s}\n", user)
		fmt.Fprintf(&w, "      password: {env: %s}\n", password)
		if b.PinThumbprint {
			fmt.Fprintf(&w, "      thumbprint: %q\n", s.Thumbprint)
		} else {
			fmt.Fprintf(&w, "      caFile: %s\n", s.CAFile)
		}
	}
	if b.Topology && len(b.Sims) > 0 {
		fmt.Fprintf(&w, "    zoneCategory: %s\n    regionCategory: %s\n", b.Sims[0].ZoneCategory, b.Sims[0].RegionCategory)
	}
	if b.RefreshInterval > 0 {
		fmt.Fprintf(&w, "    refreshInterval: %s\n", b.RefreshInterval)
	}
	if b.RequestTimeout > 0 {
		fmt.Fprintf(&w, "    requestTimeout: %s\n", b.RequestTimeout)
	}
	return w.String()
}

// Env is the environment the CCM needs for YAML's credentials, as
// NAME=value pairs.
func (b Backend) Env() []string {
	out := make([]string, 0, 2*len(b.Sims))
	for i, s := range b.Sims {
		user, password := b.envNames(i)
		out = append(out, user+"="+s.User, password+"="+s.Password)
	}
	return out
}

// envNames are the credentials' variable names of vCenter i, e.g.
// VSPHERE_ONPREM_0_USERNAME.
func (b Backend) envNames(i int) (user, password string) {
	base := fmt.Sprintf("VSPHERE_%s_%d_", envName(b.Name), i)
	return base + "USERNAME", base + "PASSWORD"
}

// envName upper-cases name and replaces what an environment variable name
// cannot hold with underscores.
func envName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, name)
}

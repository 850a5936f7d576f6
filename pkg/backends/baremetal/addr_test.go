package baremetal

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParsePoolEntry(t *testing.T) {
	tests := []struct {
		in             string
		extent, usable string
		size           uint64
		wantErr        string
	}{
		{in: "192.0.2.0/28", extent: "192.0.2.0-192.0.2.15", usable: "192.0.2.1-192.0.2.14", size: 14},
		{in: "192.0.2.0/30", extent: "192.0.2.0-192.0.2.3", usable: "192.0.2.1-192.0.2.2", size: 2},
		{in: "192.0.2.0/31", extent: "192.0.2.0-192.0.2.1", usable: "192.0.2.0-192.0.2.1", size: 2},
		{in: "192.0.2.7/32", extent: "192.0.2.7", usable: "192.0.2.7", size: 1},
		{in: " 198.51.100.10 - 198.51.100.20 ", extent: "198.51.100.10-198.51.100.20", usable: "198.51.100.10-198.51.100.20", size: 11},
		{in: "2001:db8::/120", extent: "2001:db8::-2001:db8::ff", usable: "2001:db8::-2001:db8::ff", size: 256},
		{in: "2001:db8::/64", extent: "2001:db8::-2001:db8::ffff:ffff:ffff:ffff", usable: "2001:db8::-2001:db8::ffff:ffff:ffff:ffff", size: ^uint64(0)},
		{in: "2001:db8::/32", extent: "2001:db8::-2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", usable: "2001:db8::-2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", size: ^uint64(0)},
		{in: "10.0.0.0/8", extent: "10.0.0.0-10.255.255.255", usable: "10.0.0.1-10.255.255.254", size: 1<<24 - 2},
		{in: "192.0.2.1/24", wantErr: "did you mean 192.0.2.0/24"},
		{in: "192.0.2.1", wantErr: "write it as 192.0.2.1/32"},
		{in: "pool", wantErr: "neither a CIDR"},
		{in: "192.0.2.9-192.0.2.1", wantErr: "ends before it starts"},
		{in: "192.0.2.1-2001:db8::1", wantErr: "mixes IPv4 and IPv6"},
		{in: "192.0.2.0/33", wantErr: "not a valid CIDR"},
		{in: "::ffff:192.0.2.0/120", wantErr: "IPv4-mapped"},
		{in: "fe80::/64", wantErr: "link-local"},
		{in: "0.0.0.0/0", wantErr: "unspecified"},
		{in: "a-b", wantErr: "not an IP address"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			e, err := parsePoolEntry(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parsePoolEntry(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parsePoolEntry(%q): %v", tt.in, err)
			}
			if e.extent.String() != tt.extent || e.usable.String() != tt.usable || e.usable.size() != tt.size {
				t.Errorf("parsePoolEntry(%q) = extent %s usable %s size %d; want %s, %s, %d", tt.in, e.extent, e.usable, e.usable.size(), tt.extent, tt.usable, tt.size)
			}
		})
	}
}

// FuzzParsePoolEntry checks that an accepted entry is a well-formed range
// whose usable part lies within its extent and contains what it says.
func FuzzParsePoolEntry(f *testing.F) {
	for _, s := range []string{"192.0.2.0/28", "10.0.0.1-10.0.0.9", "2001:db8::/120", "::/0", "1.2.3.4/32", "1-2", "192.0.2.1/24", "fe80::1%eth0-fe80::2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parsePoolEntry(s)
		if err != nil {
			return
		}
		u, x := e.usable, e.extent
		if !u.first.IsValid() || u.first.Is4() != u.last.Is4() || u.last.Less(u.first) {
			t.Fatalf("%q: malformed usable range %s", s, u)
		}
		if !x.contains(u.first) || !x.contains(u.last) {
			t.Fatalf("%q: usable %s outside extent %s", s, u, x)
		}
		if u.first.Zone() != "" || u.first.Is4In6() || u.size() == 0 {
			t.Fatalf("%q: bad usable range %s (size %d)", s, u, u.size())
		}
		if n := u.size(); n < 4096 {
			ip := u.first
			for i := uint64(1); i < n; i++ {
				ip = ip.Next()
			}
			if ip != u.last {
				t.Fatalf("%q: size %d of %s does not reach its last address (got %s)", s, n, u, ip)
			}
		}
	})
}

func TestFamStatePickWraps(t *testing.T) {
	fs := newFamState([]addrRange{
		{first: netip.MustParseAddr("10.0.1.1"), last: netip.MustParseAddr("10.0.1.1")},
		{first: netip.MustParseAddr("10.0.0.1"), last: netip.MustParseAddr("10.0.0.2")},
	})
	taken := map[netip.Addr]bool{}
	var probes uint64
	pick := func() (netip.Addr, bool) {
		return fs.pick(func(ip netip.Addr) bool { return taken[ip] }, &probes)
	}
	var got []string
	for range 3 {
		ip, ok := pick()
		if !ok {
			t.Fatalf("pick failed with %d of %d used", fs.used, fs.size)
		}
		taken[ip] = true
		fs.mark(ip, true)
		got = append(got, ip.String())
	}
	if strings.Join(got, ",") != "10.0.0.1,10.0.0.2,10.0.1.1" {
		t.Errorf("picked %v", got)
	}
	if _, ok := pick(); ok {
		t.Error("pick succeeded on a full pool")
	}
	freed := netip.MustParseAddr("10.0.0.2")
	delete(taken, freed)
	fs.mark(freed, false)
	if ip, ok := pick(); !ok || ip != freed {
		t.Errorf("after a release pick = %v, %v; want %s", ip, ok, freed)
	}
}

// TestPickModel checks both range kinds (bitmap and probing) against a
// plain set under random leases and releases: a pick never returns a leased
// address and fails only when the range is full.
func TestPickModel(t *testing.T) {
	for _, bitmap := range []bool{true, false} {
		t.Run(fmt.Sprintf("bitmap=%v", bitmap), func(t *testing.T) {
			r := addrRange{first: netip.MustParseAddr("2001:db8::ffc0"), last: netip.MustParseAddr("2001:db8::1:3f")}
			fs := newFamState([]addrRange{r})
			if !bitmap {
				fs.ranges[0].leased, fs.ranges[0].full = nil, nil
			}
			rng := rand.New(rand.NewPCG(1, 2))
			taken := map[netip.Addr]bool{}
			var held []netip.Addr
			var probes uint64
			for step := range 20000 {
				if len(held) > 0 && rng.IntN(3) == 0 {
					i := rng.IntN(len(held))
					ip := held[i]
					held = slices.Delete(held, i, i+1)
					delete(taken, ip)
					fs.mark(ip, false)
					continue
				}
				ip, ok := fs.pick(func(ip netip.Addr) bool { return taken[ip] }, &probes)
				if !ok {
					if uint64(len(held)) != fs.size {
						t.Fatalf("step %d: pick failed with %d of %d held", step, len(held), fs.size)
					}
					continue
				}
				if taken[ip] || !r.contains(ip) {
					t.Fatalf("step %d: picked %s (taken %v, in range %v)", step, ip, taken[ip], r.contains(ip))
				}
				taken[ip] = true
				held = append(held, ip)
				fs.mark(ip, true)
			}
		})
	}
}

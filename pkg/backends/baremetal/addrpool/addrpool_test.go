package addrpool

import (
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
			e, err := ParseEntry(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseEntry(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEntry(%q): %v", tt.in, err)
			}
			if e.Extent.String() != tt.extent || e.Usable.String() != tt.usable || e.Usable.Size() != tt.size {
				t.Errorf("ParseEntry(%q) = extent %s usable %s size %d; want %s, %s, %d", tt.in, e.Extent, e.Usable, e.Usable.Size(), tt.extent, tt.usable, tt.size)
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
		e, err := ParseEntry(s)
		if err != nil {
			return
		}
		u, x := e.Usable, e.Extent
		if !u.First.IsValid() || u.First.Is4() != u.Last.Is4() || u.Last.Less(u.First) {
			t.Fatalf("%q: malformed usable range %s", s, u)
		}
		if !x.Contains(u.First) || !x.Contains(u.Last) {
			t.Fatalf("%q: usable %s outside extent %s", s, u, x)
		}
		if u.First.Zone() != "" || u.First.Is4In6() || u.Size() == 0 {
			t.Fatalf("%q: bad usable range %s (size %d)", s, u, u.Size())
		}
		if n := u.Size(); n < 4096 {
			ip := u.First
			for i := uint64(1); i < n; i++ {
				ip = ip.Next()
			}
			if ip != u.Last {
				t.Fatalf("%q: size %d of %s does not reach its last address (got %s)", s, n, u, ip)
			}
		}
	})
}

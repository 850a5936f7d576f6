package values

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

func TestParseLoadBalancerIPs(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    []string
		wantErr string
	}{
		{name: "one IPv4", value: "192.0.2.10", want: []string{"192.0.2.10"}},
		{name: "one IPv6", value: "2001:db8::10", want: []string{"2001:db8::10"}},
		{name: "dual stack keeps order", value: "2001:db8::10,192.0.2.10", want: []string{"2001:db8::10", "192.0.2.10"}},
		{name: "white space ignored", value: " 192.0.2.10 , 2001:db8::10 ", want: []string{"192.0.2.10", "2001:db8::10"}},
		{name: "empty", value: "", wantErr: "is empty"},
		{name: "blank", value: "  ", wantErr: "is empty"},
		{name: "empty entry", value: "192.0.2.10,", wantErr: "empty entry"},
		{name: "not an address", value: "192.0.2.300", wantErr: "not an IP address"},
		{name: "CIDR", value: "192.0.2.0/24", wantErr: "not an IP address"},
		{name: "two IPv4", value: "192.0.2.10,192.0.2.11", wantErr: "at most one address per IP family"},
		{name: "two IPv6", value: "2001:db8::1,2001:db8::2", wantErr: "at most one address per IP family"},
		{name: "zone", value: "fe80::1%eth0", wantErr: "has a zone"},
		{name: "mapped", value: "::ffff:192.0.2.1", wantErr: "write it as 192.0.2.1"},
		{name: "unspecified", value: "0.0.0.0", wantErr: "cannot be a load-balancer address"},
		{name: "loopback", value: "::1", wantErr: "cannot be a load-balancer address"},
		{name: "multicast", value: "224.0.0.1", wantErr: "cannot be a load-balancer address"},
		{name: "link-local", value: "169.254.1.1", wantErr: "cannot be a load-balancer address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLoadBalancerIPs(tt.value)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseLoadBalancerIPs(%q) error = %v, want one containing %q", tt.value, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), LoadBalancerIPs) {
					t.Errorf("error %q does not name the annotation", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLoadBalancerIPs(%q): %v", tt.value, err)
			}
			var gotS []string
			for _, ip := range got {
				gotS = append(gotS, ip.String())
			}
			if !slices.Equal(gotS, tt.want) {
				t.Errorf("ParseLoadBalancerIPs(%q) = %v, want %v", tt.value, gotS, tt.want)
			}
		})
	}
}

func TestParseAllowSharedIP(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    string
		wantErr string
	}{
		{name: "plain", value: "web", want: "web"},
		{name: "trimmed", value: "  web ", want: "web"},
		{name: "punctuation", value: "team-a/web_1.x", want: "team-a/web_1.x"},
		{name: "case kept", value: "Web", want: "Web"},
		{name: "empty", value: "", wantErr: "is empty"},
		{name: "blank", value: " \t", wantErr: "is empty"},
		{name: "inner space", value: "a b", wantErr: "white space"},
		{name: "control", value: "a\x00b", wantErr: "non-printable"},
		{name: "too long", value: strings.Repeat("k", MaxAllowSharedIPLength+1), wantErr: "at most"},
		{name: "invalid UTF-8", value: "a\xffb", wantErr: "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAllowSharedIP(tt.value)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseAllowSharedIP(%q) error = %v, want one containing %q", tt.value, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), AllowSharedIP) {
					t.Errorf("error %q does not name the annotation", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseAllowSharedIP(%q) = %q, %v; want %q", tt.value, got, err, tt.want)
			}
		})
	}
}

// FuzzParseLoadBalancerIPs checks that whatever is accepted is a list of at
// most one usable address per family that survives a round trip.
func FuzzParseLoadBalancerIPs(f *testing.F) {
	for _, s := range []string{"192.0.2.10", "2001:db8::1,192.0.2.1", " 10.0.0.1 ", "", ",", "1.2.3.4,1.2.3.5", "fe80::1%eth0", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		ips, err := ParseLoadBalancerIPs(value)
		if err != nil {
			if ips != nil {
				t.Fatalf("error %v with non-nil result %v", err, ips)
			}
			return
		}
		if len(ips) == 0 || len(ips) > 2 {
			t.Fatalf("%q accepted with %d addresses", value, len(ips))
		}
		if len(ips) == 2 && ips[0].Is4() == ips[1].Is4() {
			t.Fatalf("%q accepted with two addresses of one family: %v", value, ips)
		}
		strs := make([]string, len(ips))
		for i, ip := range ips {
			if !ip.IsValid() || ip.Zone() != "" || ip.Is4In6() || ip.IsLoopback() || ip.IsUnspecified() || ip.IsMulticast() {
				t.Fatalf("%q accepted unusable address %v", value, ip)
			}
			strs[i] = ip.String()
		}
		again, err := ParseLoadBalancerIPs(strings.Join(strs, ","))
		if err != nil || !slices.Equal(again, ips) {
			t.Fatalf("round trip of %v: %v, %v", ips, again, err)
		}
	})
}

// FuzzParseAllowSharedIP checks that an accepted key is trimmed, bounded,
// free of white space and stable when parsed again.
func FuzzParseAllowSharedIP(f *testing.F) {
	for _, s := range []string{"web", " web ", "", "a b", "a\x00", "\xff", strings.Repeat("k", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		key, err := ParseAllowSharedIP(value)
		if err != nil {
			if key != "" {
				t.Fatalf("error %v with key %q", err, key)
			}
			return
		}
		if key == "" || len(key) > MaxAllowSharedIPLength || key != strings.TrimSpace(value) {
			t.Fatalf("%q accepted as %q", value, key)
		}
		if strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
			t.Fatalf("%q accepted with white space or control characters", key)
		}
		if again, err := ParseAllowSharedIP(key); err != nil || again != key {
			t.Fatalf("re-parse of %q: %q, %v", key, again, err)
		}
	})
}

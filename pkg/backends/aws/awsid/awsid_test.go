package awsid

import "testing"

func TestParseProviderID(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"aws:///eu-west-1a/i-0123456789abcdef0", "i-0123456789abcdef0"},
		{"aws:////i-0123456789abcdef0", "i-0123456789abcdef0"},
		{"aws:///i-01234567", "i-01234567"},
		{"aws://eu-west-1a/i-01234567", "i-01234567"},
		{"aws:///eu-west-1a/vol-01234567", ""},
		{"aws:///a/b/i-01234567", ""},
		{"gce:///p/z/i-01234567", ""},
		{"aws:///eu-west-1a/", ""},
		{"Aws:/i-000000aaaa#000000", ""},
		{"AWS:///eu-west-1a/i-01234567", ""},
		{"aws:///eu-west-1a/i-01234567#x", ""},
		{"aws:///eu-west-1a/i-01234567?x=1", ""},
		{"aws:///eu-west-1a/i-01234567?", ""},
		{"aws://user@eu-west-1a/i-01234567", ""},
		{"aws:///i-00000000/", ""},
		{"aws:///eu-west-1a/i-01234567/", ""},
		{"aws:///i-0000000%30", ""},
		{"aws:///eu west/i-01234567", ""},
		{"aws://///i-01234567", ""},
		{"aws:///us-west-2-lax-1a/i-01234567", "i-01234567"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseProviderID(tc.in)
			if got != tc.want || (err == nil) != (tc.want != "") {
				t.Errorf("ParseProviderID(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
	if got := ProviderID("eu-west-1a", "i-01234567"); got != "aws:///eu-west-1a/i-01234567" {
		t.Errorf("ProviderID = %q", got)
	}
}

package awsid

import (
	"math/rand/v2"
	"testing"
)

// Review probes (session 56) of 30db798 (providerIDs parsed by hand), moved
// here from package aws with the parser. They pass: they pin down what the
// change must keep.

// TestProbeProviderIDShapes (passes): the shapes upstream
// cloud-provider-aws writes or accepts, Fargate's, and malformed ones near
// them parse as the regexps did (splitProviderIDByRegexp), with the zone
// and ID named here.
func TestProbeProviderIDShapes(t *testing.T) {
	for _, tc := range []struct {
		in, zone, id string
		ok           bool
	}{
		{"aws:///eu-west-1a/i-0123456789abcdef0", "eu-west-1a", "i-0123456789abcdef0", true},
		{"aws:////i-0123456789abcdef0", "", "i-0123456789abcdef0", true},
		{"aws:///i-0123456789abcdef0", "", "i-0123456789abcdef0", true},
		{"aws://eu-west-1/i-0123456789abcdef0", "eu-west-1", "i-0123456789abcdef0", true},
		{"aws://eu-west-1a/i-01234567", "eu-west-1a", "i-01234567", true},
		{"aws:///us-west-2-lax-1a/i-0abcdef12", "us-west-2-lax-1a", "i-0abcdef12", true},
		{"aws:///us-east-1-wl1-bos-wlz-1/i-0abcdef12", "us-east-1-wl1-bos-wlz-1", "i-0abcdef12", true},
		// Fargate: upstream answers it without EC2; this backend has no
		// instance for it.
		{"aws:///us-east-1a/fargate-ip-192-168-1-1.ec2.internal", "", "", false},
		{"aws:///us-east-1a/fargate-10.0.0.1", "", "", false},
		// Malformed.
		{"aws:///eu-west-1a/i-0123456789abcdef0\n", "", "", false},
		{"aws:///eu-west-1a\n/i-0123456789abcdef0", "", "", false},
		{"aws:///eu-west-1a/i-0123456789abcdef0 ", "", "", false},
		{"aws:/// eu-west-1a/i-01234567", "", "", false},
		{"aws:///eu-west-1a/i-0123456\u0661", "", "", false}, // an Arabic-Indic digit
		{"aws:///eu-west-1\u00e1/i-01234567", "", "", false},
		{"aws:///eu-west-1a/I-01234567", "", "", false},
		{"aws:///eu-west-1a/i_01234567", "", "", false},
		{"aws:///eu-west-1a/i-", "", "", false},
		{"aws:///eu-west-1a/i-0123456789abcdef0?x=1", "", "", false},
		{"aws:///eu-west-1a/i-0123456789abcdef0#f", "", "", false},
		{"aws:///eu-west-1a/i-01234567/x", "", "", false},
		{"aws:////eu-west-1a/i-01234567", "eu-west-1a", "i-01234567", true}, // two slashes trimmed, as upstream's Trim
		{"aws://///i-01234567", "", "", false},
		{"aws:i-01234567", "", "", false},
		{"aws:/i-01234567", "", "", false},
		{" aws:///eu-west-1a/i-01234567", "", "", false},
		{"Aws:///eu-west-1a/i-01234567", "", "", false},
		{"aws:///\xff/i-01234567", "", "", false},
		{"aws:///eu-west-1a/i-0123456\xff", "", "", false},
		{"aws:///-/i-01234567", "-", "i-01234567", true}, // zoneRE allows it; checkRegion refuses it
	} {
		zone, id, err := SplitProviderID(tc.in)
		wz, wid, wok := splitProviderIDByRegexp(tc.in)
		if (err == nil) != wok || zone != wz || id != wid {
			t.Errorf("SplitProviderID(%q) = %q, %q, %v; the regexps: %q, %q, %v", tc.in, zone, id, err, wz, wid, wok)
		}
		if (err == nil) != tc.ok || zone != tc.zone || id != tc.id {
			t.Errorf("SplitProviderID(%q) = %q, %q, %v; want %q, %q, ok %v", tc.in, zone, id, err, tc.zone, tc.id, tc.ok)
		}
	}
}

// TestProbeProviderIDAgreesOverAllBytes (passes): the hand-written check
// agrees with the regexps over random strings of every byte value (the
// existing differential draws from 12 characters), around the valid form.
func TestProbeProviderIDAgreesOverAllBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(56, 56))
	valid := "aws:///eu-west-1a/i-0123456789abcdef0"
	for range 100_000 {
		b := []byte(valid)
		for range 1 + rng.IntN(3) {
			switch i := rng.IntN(len(b)); rng.IntN(3) {
			case 0:
				b[i] = byte(rng.IntN(256))
			case 1:
				b = append(b[:i], b[i+1:]...)
			default:
				b = append(b[:i], append([]byte{byte(rng.IntN(256))}, b[i:]...)...)
			}
		}
		in := string(b)
		zone, id, err := SplitProviderID(in)
		wz, wid, wok := splitProviderIDByRegexp(in)
		if (err == nil) != wok || zone != wz || id != wid {
			t.Fatalf("SplitProviderID(%q) = %q, %q, %v; the regexps: %q, %q, %v", in, zone, id, err, wz, wid, wok)
		}
	}
}

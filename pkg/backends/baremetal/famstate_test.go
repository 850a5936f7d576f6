package baremetal

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/addrpool"
)

func TestFamStatePickWraps(t *testing.T) {
	fs := newFamState([]addrpool.Range{
		{First: netip.MustParseAddr("10.0.1.1"), Last: netip.MustParseAddr("10.0.1.1")},
		{First: netip.MustParseAddr("10.0.0.1"), Last: netip.MustParseAddr("10.0.0.2")},
	})
	taken := map[netip.Addr]bool{}
	var probes uint64
	pick := func() (netip.Addr, bool) {
		return fs.pick(func(ip netip.Addr) bool { return taken[ip] }, &probes, true)
	}
	var got []string
	for range 3 {
		ip, ok := pick()
		if !ok {
			t.Fatalf("pick failed with %d of %d used", fs.used, fs.size)
		}
		taken[ip] = true
		fs.mark(ip, true, false)
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
	fs.mark(freed, false, true)
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
			r := addrpool.Range{First: netip.MustParseAddr("2001:db8::ffc0"), Last: netip.MustParseAddr("2001:db8::1:3f")}
			fs := newFamState([]addrpool.Range{r})
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
					fs.mark(ip, false, true)
					continue
				}
				ip, ok := fs.pick(func(ip netip.Addr) bool { return taken[ip] }, &probes, true)
				if !ok {
					if uint64(len(held)) != fs.size {
						t.Fatalf("step %d: pick failed with %d of %d held", step, len(held), fs.size)
					}
					continue
				}
				if taken[ip] || !r.Contains(ip) {
					t.Fatalf("step %d: picked %s (taken %v, in range %v)", step, ip, taken[ip], r.Contains(ip))
				}
				taken[ip] = true
				held = append(held, ip)
				fs.mark(ip, true, false)
			}
		})
	}
}

package baremetal

import (
	"container/heap"
	"encoding/binary"
	"maps"
	"math/bits"
	"net/netip"
	"slices"
	"sort"

	"k8s.io/component-base/metrics"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/addrpool"
)

// maxBitmapRange is the largest range tracked with a bitmap (2 MiB of bits).
// Larger ranges are IPv6 ranges that can never be nearly full.
const maxBitmapRange = 1 << 24

// famState is the allocation state of one IP family of a pool. Allocation is
// next-fit: it resumes where the previous one stopped, so it never rescans
// the pool from its start, and a just-released address is handed out again
// only after the cursor has gone round the whole range. An address freed
// ahead of the cursor (after a restart or a reload the cursor is at the
// range's start, so every release is) rests: it is skipped until the
// cursor passes it.
type famState struct {
	ranges []*rangeState
	// size is the number of usable addresses, saturated at 2^64-1.
	size uint64
	// used counts the leased usable addresses.
	used uint64
	// cur indexes the range allocation resumes in.
	cur int
	// inUse reports used, once the allocator is published.
	inUse metrics.GaugeMetric
}

func newFamState(ranges []addrpool.Range) famState {
	slices.SortFunc(ranges, func(a, b addrpool.Range) int { return a.First.Compare(b.First) })
	fs := famState{}
	for _, r := range ranges {
		rs := newRangeState(r)
		fs.ranges = append(fs.ranges, rs)
		if fs.size+rs.size < fs.size {
			fs.size = ^uint64(0)
		} else {
			fs.size += rs.size
		}
	}
	return fs
}

// find returns the range holding ip, or nil.
func (fs *famState) find(ip netip.Addr) *rangeState {
	i := sort.Search(len(fs.ranges), func(i int) bool { return ip.Compare(fs.ranges[i].Last) <= 0 })
	if i < len(fs.ranges) && fs.ranges[i].Contains(ip) {
		return fs.ranges[i]
	}
	return nil
}

// mark records ip, a usable address of this family, as taken or free;
// with rest, an address freed ahead of its range's cursor rests (one that
// was leased: clients may still send to it).
func (fs *famState) mark(ip netip.Addr, leased, rest bool) {
	rs := fs.find(ip)
	if rs == nil {
		return
	}
	if leased {
		fs.used++
	} else {
		fs.used--
	}
	if fs.inUse != nil {
		fs.inUse.Set(float64(fs.used))
	}
	rs.mark(ip, leased, rest)
}

// pick returns a free address, starting in the range the previous pick
// ended in and moving on only when a range is full. taken is the
// authoritative test for ranges without a bitmap; probes counts the words
// or addresses looked at; wake lets a range with only resting addresses
// free wake them (the caller tries every pool without it first).
func (fs *famState) pick(taken func(netip.Addr) bool, probes *uint64, wake bool) (netip.Addr, bool) {
	if fs.used >= fs.size {
		return netip.Addr{}, false
	}
	for k := range fs.ranges {
		ri := (fs.cur + k) % len(fs.ranges)
		rs := fs.ranges[ri]
		if rs.used >= rs.size {
			continue
		}
		if ip, ok := rs.pick(taken, probes, wake); ok {
			fs.cur = ri
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// rangeState is one usable range and which of its addresses are leased.
type rangeState struct {
	addrpool.Range
	size, used uint64
	// leased has a bit per address, set when leased; full has a bit per
	// word of leased, set when that word is all ones. Both are nil for a
	// range over maxBitmapRange addresses.
	leased, full []uint64
	// next is the bitmap cursor (an offset), nextAddr the probing cursor.
	next     uint64
	nextAddr netip.Addr
	// rest are the addresses freed ahead of the cursor: free, but still
	// set in the bitmap (and taken for probing) until the cursor passes
	// them, or until no pool the Service may use has another free address;
	// restq orders them (a min-heap; entries no longer resting are skipped).
	rest  map[netip.Addr]bool
	restq addrHeap
	// woken, while a dry run runs, collects the addresses its picks woke.
	woken *[]netip.Addr
}

// addrHeap is a min-heap of addresses.
type addrHeap []netip.Addr

func (h addrHeap) Len() int           { return len(h) }
func (h addrHeap) Less(i, j int) bool { return h[i].Less(h[j]) }
func (h addrHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *addrHeap) Push(x any)        { *h = append(*h, x.(netip.Addr)) }
func (h *addrHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newRangeState(r addrpool.Range) *rangeState {
	rs := &rangeState{Range: r, size: r.Size(), nextAddr: r.First}
	if rs.size > maxBitmapRange {
		return rs
	}
	words := (rs.size + 63) / 64
	rs.leased = make([]uint64, words)
	rs.full = make([]uint64, (words+63)/64)
	// The bits past the range's end are never free.
	for off := rs.size; off < words*64; off++ {
		rs.setBit(off, true)
	}
	return rs
}

// offset is ip's position in a bitmap range (under 2^24, so the low 64
// bits of the difference are the whole of it).
func (rs *rangeState) offset(ip netip.Addr) uint64 {
	_, lo := addrpool.U128(ip)
	_, first := addrpool.U128(rs.First)
	return lo - first
}

// at is the address at offset off.
func (rs *rangeState) at(off uint64) netip.Addr {
	hi, lo := addrpool.U128(rs.First)
	lo, carry := bits.Add64(lo, off, 0)
	hi += carry
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	if rs.First.Is4() {
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return netip.AddrFrom16(b)
}

func (rs *rangeState) mark(ip netip.Addr, leased, rest bool) {
	if leased {
		rs.used++
		if rs.rest[ip] {
			// Requested while resting: its bit is already set.
			delete(rs.rest, ip)
			return
		}
	} else {
		rs.used--
		if rest && rs.ahead(ip) {
			rs.addRest(ip)
			return
		}
	}
	if rs.leased != nil {
		rs.setBit(rs.offset(ip), leased)
	}
}

// ahead reports whether the cursor reaches ip before it wraps round.
func (rs *rangeState) ahead(ip netip.Addr) bool {
	if rs.leased == nil {
		return ip.Compare(rs.nextAddr) >= 0
	}
	return rs.offset(ip) >= rs.next
}

// addRest makes ip, free and ahead of the cursor (or behind it once
// the cursor is put back by a dry run), rest; its bit stays set.
func (rs *rangeState) addRest(ip netip.Addr) {
	if rs.rest == nil {
		rs.rest = map[netip.Addr]bool{}
	}
	rs.rest[ip] = true
	heap.Push(&rs.restq, ip)
	if len(rs.restq) > 2*len(rs.rest)+64 {
		// Entries of addresses leased while resting pile up: rebuild.
		rs.restq = slices.Collect(maps.Keys(rs.rest))
		heap.Init(&rs.restq)
	}
	if rs.leased != nil {
		rs.setBit(rs.offset(ip), true)
	}
}

// wake frees the resting addresses the cursor passed moving from address
// from to picked (every resting address lies ahead of the cursor, so
// those below picked unless the pick wrapped round the range's end, and
// then all of them); with all, every one.
func (rs *rangeState) wake(from, picked netip.Addr, all bool) {
	if all || picked.Less(from) {
		for ip := range rs.rest {
			rs.free(ip)
		}
		rs.restq = nil
		return
	}
	for len(rs.restq) > 0 && rs.restq[0].Less(picked) {
		if ip := heap.Pop(&rs.restq).(netip.Addr); rs.rest[ip] {
			rs.free(ip)
		}
	}
}

// free ends ip's rest.
func (rs *rangeState) free(ip netip.Addr) {
	delete(rs.rest, ip)
	if rs.leased != nil {
		rs.setBit(rs.offset(ip), false)
	}
	if rs.woken != nil {
		*rs.woken = append(*rs.woken, ip)
	}
}

func (rs *rangeState) setBit(off uint64, leased bool) {
	w := off / 64
	if leased {
		rs.leased[w] |= 1 << (off % 64)
	} else {
		rs.leased[w] &^= 1 << (off % 64)
	}
	if rs.leased[w] == ^uint64(0) {
		rs.full[w/64] |= 1 << (w % 64)
	} else {
		rs.full[w/64] &^= 1 << (w % 64)
	}
}

// unwake puts back the resting addresses a dry run's picks woke (decide
// leases nothing, so none of them was leased since).
func (rs *rangeState) unwake(woken []netip.Addr) {
	for _, ip := range woken {
		if !rs.rest[ip] {
			rs.addRest(ip)
		}
	}
}

// pick returns a free address of a range that has one, from its cursor on,
// wrapping to its start. The resting addresses it passes are free from
// then on; with wake, when only resting addresses are free, they all are.
func (rs *rangeState) pick(taken func(netip.Addr) bool, probes *uint64, wake bool) (netip.Addr, bool) {
	from := rs.cursor()
	ip, ok := rs.pickUnrested(taken, probes)
	if !ok && wake && len(rs.rest) > 0 {
		rs.wake(from, from, true)
		ip, ok = rs.pickUnrested(taken, probes)
	}
	if ok && len(rs.rest) > 0 {
		rs.wake(from, ip, false)
	}
	return ip, ok
}

// cursor is the address the next pick starts from.
func (rs *rangeState) cursor() netip.Addr {
	if rs.leased == nil {
		return rs.nextAddr
	}
	return rs.at(rs.next)
}

// pickUnrested is pick skipping the resting addresses.
func (rs *rangeState) pickUnrested(taken func(netip.Addr) bool, probes *uint64) (netip.Addr, bool) {
	if rs.leased == nil {
		return rs.probe(func(ip netip.Addr) bool { return rs.rest[ip] || taken(ip) }, probes)
	}
	off, ok := rs.scan(rs.next, rs.size, probes)
	if !ok {
		off, ok = rs.scan(0, rs.next, probes)
	}
	if !ok {
		return netip.Addr{}, false
	}
	rs.next = (off + 1) % rs.size
	return rs.at(off), true
}

// scan returns the lowest free offset in [from, to), skipping full words
// and groups of 64 full words.
func (rs *rangeState) scan(from, to uint64, probes *uint64) (uint64, bool) {
	for off := from; off < to; {
		*probes++
		w := off / 64
		if rs.full[w/64] == ^uint64(0) {
			off = (w/64 + 1) * 64 * 64
			continue
		}
		if rs.full[w/64]&(1<<(w%64)) != 0 {
			off = (w + 1) * 64
			continue
		}
		if free := ^rs.leased[w] &^ (1<<(off%64) - 1); free != 0 {
			got := w*64 + uint64(bits.TrailingZeros64(free)) //nolint:gosec // G115: 0..63, free is not zero.
			return got, got < to
		}
		off = (w + 1) * 64
	}
	return 0, false
}

// probe walks a range too large for a bitmap from its cursor. Among any
// used+resting+1 consecutive addresses one is free, so it stops within
// that many probes.
func (rs *rangeState) probe(taken func(netip.Addr) bool, probes *uint64) (netip.Addr, bool) {
	for n := uint64(0); n <= rs.used+uint64(len(rs.rest)); n++ {
		*probes++
		ip := rs.nextAddr
		if ip == rs.Last {
			rs.nextAddr = rs.First
		} else {
			rs.nextAddr = ip.Next()
		}
		if !taken(ip) {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

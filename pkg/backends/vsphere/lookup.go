package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/vsphere/vsid"
)

// Event reasons of lookups.
const (
	// ReasonInvalidProviderID: the node's providerID has the vsphere scheme
	// but is not vsphere://<bios-uuid>. The same reason every backend gives
	// a providerID of its scheme that does not parse.
	ReasonInvalidProviderID = "InvalidProviderID"
	// ReasonNodeAmbiguous: two VMs match one node.
	ReasonNodeAmbiguous = "VSphereNodeAmbiguous"
	// ReasonVMUnreadable: vCenter returns the node's VM without its
	// configuration (its datastore is inaccessible): its state cannot be
	// told, and the node is left as it is.
	ReasonVMUnreadable = "VSphereVMUnreadable"
)

// errNotFound means every vCenter was searched and none has the VM.
var errNotFound = errors.New("no VM in any vCenter matches the node")

// match is a VM found for a node and the snapshot it was found in.
type match struct {
	vm   *vmInfo
	snap *snapshot
}

// stage is one way of matching a node to VMs. Weak stages (names and
// addresses) are trusted only when every vCenter answered.
type stage struct {
	by   string
	weak bool
	// uuids are the BIOS UUIDs the stage looks for, if it looks by UUID.
	uuids  []string
	search func(s *snapshot) []*vmInfo
}

// clockSkew is how far the API server's clock (a node's creation time) and
// ours may disagree.
const clockSkew = 30 * time.Second

// find returns the node's VM. It first searches inventories younger than the
// refresh interval; when nothing matches, it searches inventories retrieved
// after the node was created (see missNotBefore), so a VM created a moment
// ago is found and a VM reported gone is gone.
func (c *Cloud) find(ctx context.Context, node *corev1.Node) (match, error) {
	stages, err := stagesFor(node)
	if err != nil {
		return match{}, err
	}
	start := time.Now()
	stale := start.Add(-c.settings.RefreshInterval.Duration)
	m, _, err := c.search(ctx, stale, stages, node)
	if !errors.Is(err, errNotFound) {
		c.recordLookup(err)
		return m, err
	}
	nb := missNotBefore(node, start, stale)
	m, snaps, err := c.search(ctx, nb, stages, node)
	if errors.Is(err, errNotFound) && nb.Before(start) && !aligned(snaps) {
		// A VM moving between vCenters can be missing from inventories
		// retrieved at different times: only a common retrieval shows
		// it gone.
		m, _, err = c.search(ctx, start, stages, node)
	}
	c.recordLookup(err)
	return m, err
}

// recordLookup counts a lookup in the snapshot metrics: a hit when a VM
// matched, a miss when none did; errors are neither.
func (c *Cloud) recordLookup(err error) {
	if len(c.vcenters) == 0 || (err != nil && !errors.Is(err, errNotFound)) {
		return
	}
	// Every vCenter's cache counts under the backend's name.
	c.vcenters[0].inv.RecordLookup(err == nil)
}

// maxSnapshotSpread is how far apart the retrievals of the vCenters'
// inventories may have started for a VM missing from all of them to be
// gone, rather than moving between them. Concurrent refreshes start
// within milliseconds.
const maxSnapshotSpread = time.Second

// aligned reports whether the snapshots were retrieved together.
func aligned(snaps []*snapshot) bool {
	if len(snaps) < 2 {
		return true
	}
	lo, hi := snaps[0].started, snaps[0].started
	for _, s := range snaps[1:] {
		if s.started.Before(lo) {
			lo = s.started
		}
		if s.started.After(hi) {
			hi = s.started
		}
	}
	return hi.Sub(lo) <= maxSnapshotSpread
}

// missNotBefore is how recent an inventory must be for a miss to be
// conclusive. A node's VM exists before its kubelet registers the node, so
// an inventory retrieved after the node was created (with a margin for
// clock skew) that lacks the VM shows it gone: a miss then costs no
// refresh, and a node that matches no VM (unclaimed, or another cloud's)
// does not make every lookup retrieve every inventory. For a node created
// recently, or of unknown age, only an inventory retrieved after the call
// began will do.
func missNotBefore(node *corev1.Node, start, stale time.Time) time.Time {
	created := node.CreationTimestamp.Time
	if created.IsZero() {
		return start
	}
	nb := created.Add(clockSkew)
	if nb.After(start) {
		return start
	}
	if nb.Before(stale) {
		return stale
	}
	return nb
}

// search matches the node against every vCenter's inventory, stage by
// stage: the first stage with one match wins, two matches are an error.
func (c *Cloud) search(ctx context.Context, notBefore time.Time, stages []stage, node *corev1.Node) (match, []*snapshot, error) {
	snaps, failures := c.snapshots(ctx, notBefore)
	m, err := c.match(snaps, failures, stages, node)
	return m, snaps, err
}

// match matches the node against snapshots, stage by stage. A node
// matches no VM (errNotFound) only when every vCenter answered, no VM that
// could be the node's was unreadable, and the vCenter and datacenter the
// node was initialised in, if recorded, are configured.
func (c *Cloud) match(snaps []*snapshot, failures []error, stages []stage, node *corev1.Node) (match, error) {
	unreadable := mayBeUnreadable(snaps, stages)
	for _, st := range stages {
		var found []match
		for _, s := range snaps {
			for _, vm := range st.search(s) {
				found = append(found, match{vm: vm, snap: s})
			}
		}
		// A weak match is trusted only when every VM was seen: the
		// missing one may match too.
		if len(found) == 0 || (st.weak && (len(failures) > 0 || len(unreadable) > 0)) {
			continue
		}
		if len(found) > 1 {
			return match{}, ambiguous(node, st.by, found)
		}
		return found[0], nil
	}
	if len(failures) > 0 {
		return match{}, joinErrors(failures)
	}
	if len(unreadable) > 0 {
		return match{}, unreadableError(node, unreadable)
	}
	if err := c.checkRecord(node); err != nil {
		return match{}, err
	}
	return match{}, errNotFound
}

// mayBeUnreadable lists the unreadable VMs that may be the node's: those
// whose UUID is unknown or one the stages look for; for a node without a
// providerID (matched by name or address too), every unreadable VM.
func mayBeUnreadable(snaps []*snapshot, stages []stage) []unreadableVM {
	var out []unreadableVM
	for _, s := range snaps {
		for _, u := range s.unreadable {
			if u.UUID == "" || anyWeak(stages) || lookedFor(stages, u.UUID) {
				out = append(out, u)
			}
		}
	}
	return out
}

func anyWeak(stages []stage) bool {
	for _, st := range stages {
		if st.weak {
			return true
		}
	}
	return false
}

func lookedFor(stages []stage, uuid string) bool {
	for _, st := range stages {
		for _, u := range st.uuids {
			if u == uuid {
				return true
			}
		}
	}
	return false
}

// unreadableError says the node's VM cannot be told from the unreadable
// VMs: a user error when one of them is known to be the node's VM.
func unreadableError(node *corev1.Node, vms []unreadableVM) error {
	for _, u := range vms {
		if u.UUID != "" {
			return newUserError(ReasonVMUnreadable, "the VM of node %s, %s, is unreadable: vCenter returns it without its configuration, as it does while the VM's files (its datastore) cannot be reached; the node is left as it is until vCenter can read the VM again",
				node.Name, u)
		}
	}
	return fmt.Errorf("no readable VM matches node %s, and vCenter returns VMs %s without their configuration (their datastore may be inaccessible): the node's VM may be one of them, so it is not called gone",
		node.Name, unreadableNames(vms))
}

// unreadableNames lists unreadable VMs for messages, at most ten.
func unreadableNames(vms []unreadableVM) string {
	names := make([]string, 0, min(len(vms), 10))
	for _, u := range vms[:min(len(vms), 10)] {
		names = append(names, u.String())
	}
	if len(vms) > 10 {
		names = append(names, fmt.Sprintf("and %d more", len(vms)-10))
	}
	return strings.Join(names, ", ")
}

// snapshots returns the inventory of every vCenter that answers, and the
// errors of those that do not, asking them all at once.
func (c *Cloud) snapshots(ctx context.Context, notBefore time.Time) ([]*snapshot, []error) {
	snaps := make([]*snapshot, len(c.vcenters))
	errs := make([]error, len(c.vcenters))
	var wg sync.WaitGroup
	for i, v := range c.vcenters {
		wg.Go(func() { snaps[i], errs[i] = v.snapshotSince(ctx, notBefore) })
	}
	wg.Wait()
	var okSnaps []*snapshot
	var failures []error
	for i := range snaps {
		if errs[i] != nil {
			failures = append(failures, errs[i])
			continue
		}
		okSnaps = append(okSnaps, snaps[i])
	}
	return okSnaps, failures
}

func ambiguous(node *corev1.Node, by string, found []match) error {
	names := make([]string, 0, len(found))
	for _, m := range found {
		names = append(names, fmt.Sprintf("%s/%s/%s (%s)", m.vm.VCenter, m.vm.Datacenter, m.vm.Name, m.vm.UUID))
	}
	return newUserError(ReasonNodeAmbiguous, "node %s matches %d VMs by %s: %s; set the node's providerID to vsphere://<bios-uuid> of the right one",
		node.Name, len(found), by, strings.Join(names, ", "))
}

// stagesFor returns how to find the node: by its providerID, or, without
// one, by system UUID, then guest DNS name, then address.
func stagesFor(node *corev1.Node) ([]stage, error) {
	if node.Spec.ProviderID != "" {
		uuid, err := vsid.UUIDFromProviderID(node.Spec.ProviderID)
		if err != nil {
			return nil, newUserError(ReasonInvalidProviderID, "node %s: spec.providerID: %w", node.Name, err)
		}
		return []stage{{by: "providerID", uuids: []string{uuid}, search: func(s *snapshot) []*vmInfo { return s.byUUID[uuid] }}}, nil
	}
	sys := node.Status.NodeInfo.SystemUUID
	return []stage{
		{by: "system UUID", uuids: vsid.SystemUUIDs(sys), search: bySystemUUID(sys)},
		{by: "guest DNS name", weak: true, search: byDNSName(nodeNames(node))},
		{by: "address", weak: true, search: byAddress(nodeIPs(node))},
	}, nil
}

func bySystemUUID(reported string) func(*snapshot) []*vmInfo {
	uuids := vsid.SystemUUIDs(reported)
	return func(s *snapshot) []*vmInfo {
		var out []*vmInfo
		for _, u := range uuids {
			out = append(out, s.byUUID[u]...)
		}
		return out
	}
}

// nodeNames are the node's name and its Hostname addresses, lower case.
func nodeNames(node *corev1.Node) []string {
	names := []string{strings.ToLower(node.Name)}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeHostName && a.Address != "" {
			names = append(names, strings.ToLower(a.Address))
		}
	}
	return names
}

func byDNSName(names []string) func(*snapshot) []*vmInfo {
	return func(s *snapshot) []*vmInfo {
		var out []*vmInfo
		for _, vm := range s.vms {
			if vm.HostName != "" && dnsNameMatches(strings.ToLower(vm.HostName), names) {
				out = append(out, vm)
			}
		}
		return out
	}
}

// dnsNameMatches is true when the guest's name is one of names, or a fully
// qualified form of one.
func dnsNameMatches(guest string, names []string) bool {
	for _, n := range names {
		if guest == n || strings.HasPrefix(guest, n+".") {
			return true
		}
	}
	return false
}

// nodeIPs are the node's InternalIP and ExternalIP addresses.
func nodeIPs(node *corev1.Node) []string {
	var ips []string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			ips = append(ips, a.Address)
		}
	}
	return ips
}

func byAddress(ips []string) func(*snapshot) []*vmInfo {
	return func(s *snapshot) []*vmInfo {
		if len(ips) == 0 {
			return nil
		}
		var out []*vmInfo
		for _, vm := range s.vms {
			if hasIP(vm, ips) {
				out = append(out, vm)
			}
		}
		return out
	}
}

func hasIP(vm *vmInfo, ips []string) bool {
	for _, g := range vm.IPs {
		for _, ip := range ips {
			if g.IP == ip {
				return true
			}
		}
	}
	return false
}

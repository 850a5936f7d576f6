package vsphere

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// zonedSim is a simulator with guest info on every VM and zone/region tags:
// region-1 on the datacenter, zone-a on cluster DC0_C0, zone-b on DC0_C1,
// and zone-c on host DC0_C1_H0 alone (nearer than its cluster).
func zonedSim(t *testing.T) (*sim, []vm) {
	t.Helper()
	s := startSim(t)
	vms := guestAll(t, s, 1)
	s.tag(t, "k8s-region", "region-1", "/DC0")
	s.tag(t, "k8s-zone", "zone-a", "/DC0/host/DC0_C0")
	s.tag(t, "k8s-zone", "zone-b", "/DC0/host/DC0_C1")
	s.tag(t, "k8s-zone", "zone-c", "/DC0/host/DC0_C1/DC0_C1_H0")
	return s, vms
}

// hostOf returns the inventory name of a VM's host and cluster.
func hostOf(t *testing.T, v vm) (host, cluster string) {
	t.Helper()
	ctx := context.Background()
	h, err := v.obj.HostSystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name, err := h.ObjectName(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return name, name[:strings.LastIndex(name, "_")]
}

func TestInstanceMetadata(t *testing.T) {
	s, vms := zonedSim(t)
	c := newCloud(t, []*sim{s}, withZones())
	ctx := context.Background()
	for i, v := range vms {
		t.Run(v.name, func(t *testing.T) {
			md, err := c.InstanceMetadata(ctx, newNode("n", withVM(v)))
			if err != nil {
				t.Fatalf("InstanceMetadata: %v", err)
			}
			if md.ProviderID != "vsphere://"+v.uuid {
				t.Errorf("providerID %q, want vsphere://%s", md.ProviderID, v.uuid)
			}
			ip := "10.1.0." + itoa(i+1)
			want := []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: ip},
				{Type: corev1.NodeExternalIP, Address: ip},
				{Type: corev1.NodeHostName, Address: strings.ToLower(v.name)},
			}
			if !equalAddrs(md.NodeAddresses, want) {
				t.Errorf("addresses %v, want %v", md.NodeAddresses, want)
			}
			host, cluster := hostOf(t, v)
			wantZone := map[string]string{"DC0_C0": "zone-a", "DC0_C1": "zone-b"}[cluster]
			if host == "DC0_C1_H0" {
				wantZone = "zone-c"
			}
			if md.Zone != wantZone || md.Region != "region-1" {
				t.Errorf("zone/region %q/%q on host %s, want %q/region-1", md.Zone, md.Region, host, wantZone)
			}
			if !strings.HasPrefix(md.InstanceType, "vsphere-vm.cpu-") || !strings.Contains(md.InstanceType, ".mem-") || !strings.Contains(md.InstanceType, ".os-") {
				t.Errorf("instance type %q", md.InstanceType)
			}
		})
	}
}

func TestInstanceMetadataWithoutTopology(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	c := newCloud(t, []*sim{s})
	md, err := c.InstanceMetadata(context.Background(), newNode("n", withVM(vms[0])))
	if err != nil {
		t.Fatal(err)
	}
	if md.Zone != "" || md.Region != "" {
		t.Errorf("zone/region %q/%q without categories configured, want none", md.Zone, md.Region)
	}
}

func TestNodeWithoutProviderID(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	// Two VMs share a DNS name: matching by it is ambiguous.
	s.setGuest(t, vms[5], "", "twin")
	s.setGuest(t, vms[4], "", "twin.example.com")
	c := newCloud(t, []*sim{s})
	ctx := context.Background()
	tests := []struct {
		name    string
		node    *corev1.Node
		want    *vm
		wantErr string
	}{
		{name: "system UUID as written", node: newNode("x", withSystemUUID(strings.ToUpper(vms[0].uuid))), want: &vms[0]},
		{name: "system UUID byte-swapped (old VM hardware)", node: newNode("x", withSystemUUID(swapped(vms[1].uuid))), want: &vms[1]},
		{name: "guest DNS name", node: newNode(strings.ToLower(vms[2].name)), want: &vms[2]},
		{name: "address", node: newNode("x", withAddress(corev1.NodeInternalIP, "10.1.0.4")), want: &vms[3]},
		{name: "system UUID wins over name", node: newNode(strings.ToLower(vms[2].name), withSystemUUID(vms[0].uuid)), want: &vms[0]},
		{name: "two VMs by DNS name", node: newNode("twin"), wantErr: "matches 2 VMs by guest DNS name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exists, eerr := c.InstanceExists(ctx, tt.node)
			md, merr := c.InstanceMetadata(ctx, tt.node)
			if tt.wantErr != "" {
				if eerr == nil || !strings.Contains(eerr.Error(), tt.wantErr) {
					t.Errorf("InstanceExists = %v, %v; want error %q", exists, eerr, tt.wantErr)
				}
				if ue, ok := backends.AsUserError(merr); !ok || ue.Reason != ReasonNodeAmbiguous {
					t.Errorf("InstanceMetadata error %v, want a %s user error", merr, ReasonNodeAmbiguous)
				}
				return
			}
			if eerr != nil || !exists {
				t.Fatalf("InstanceExists = %v, %v; want true", exists, eerr)
			}
			if merr != nil {
				t.Fatal(merr)
			}
			if md.ProviderID != ProviderIDPrefix+tt.want.uuid {
				t.Errorf("providerID %q, want that of %s (%s)", md.ProviderID, tt.want.name, tt.want.uuid)
			}
		})
	}
	t.Run("no VM matches", func(t *testing.T) {
		exists, err := c.InstanceExists(ctx, newNode("stranger", withSystemUUID("00000000-0000-0000-0000-000000000001")))
		if err != nil || exists {
			t.Errorf("InstanceExists = %v, %v; want false, nil (not mine)", exists, err)
		}
	})
}

// swapped is u with its first three fields byte-swapped, as SMBIOS before
// 2.6 reports a BIOS UUID (written here apart from vsid.SystemUUIDs).
func swapped(u string) string {
	return swapBytes(u[0:8]) + "-" + swapBytes(u[9:13]) + "-" + swapBytes(u[14:18]) + u[18:]
}

// swapBytes reverses the byte order of a hex string.
func swapBytes(hex string) string {
	b := make([]byte, 0, len(hex))
	for i := len(hex) - 2; i >= 0; i -= 2 {
		b = append(b, hex[i], hex[i+1])
	}
	return string(b)
}

func TestInstanceExistsAndShutdown(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	c := newCloud(t, []*sim{s})
	ctx := context.Background()
	gone, off := vms[0], vms[1]
	s.destroy(t, gone)
	s.powerOff(t, off)
	tests := []struct {
		name                   string
		node                   *corev1.Node
		wantExists, wantShutdn bool
	}{
		{"running", newNode("a", withVM(vms[2])), true, false},
		{"powered off", newNode("b", withVM(off)), true, true},
		{"destroyed", newNode("c", withVM(gone)), false, false},
		{"upper-case providerID", newNode("d", withProviderID("vsphere://"+strings.ToUpper(vms[2].uuid))), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exists, err := c.InstanceExists(ctx, tt.node)
			if err != nil || exists != tt.wantExists {
				t.Errorf("InstanceExists = %v, %v; want %v", exists, err, tt.wantExists)
			}
			shut, err := c.InstanceShutdown(ctx, tt.node)
			if err != nil || shut != tt.wantShutdn {
				t.Errorf("InstanceShutdown = %v, %v; want %v", shut, err, tt.wantShutdn)
			}
		})
	}
}

// TestMissAfterRefreshIsRefreshed: a VM created after the cache was filled
// is found, not reported gone.
func TestMissAfterRefreshIsRefreshed(t *testing.T) {
	s := startSim(t)
	vms := s.vms(t, "DC0")
	c := newCloud(t, []*sim{s})
	ctx := context.Background()
	if ok, err := c.InstanceExists(ctx, newNode("a", withVM(vms[0]))); err != nil || !ok {
		t.Fatalf("warming the cache: %v, %v", ok, err)
	}
	clone := cloneVM(t, s, vms[0], "late")
	ok, err := c.InstanceExists(ctx, newNode("late", withVM(clone)))
	if err != nil || !ok {
		t.Errorf("InstanceExists for a VM created after the last refresh = %v, %v; want true", ok, err)
	}
}

func TestGuestInfoMissing(t *testing.T) {
	s := startSim(t)
	vms := s.vms(t, "DC0")
	c := newCloud(t, []*sim{s})
	ctx := context.Background()
	node := newNode("a", withVM(vms[0]))
	md, err := c.InstanceMetadata(ctx, node)
	ue, ok := backends.AsUserError(err)
	if md != nil || !ok || ue.Reason != ReasonGuestInfoMissing || !strings.Contains(err.Error(), "VMware Tools") {
		t.Fatalf("InstanceMetadata = %v, %v; want a %s user error naming VMware Tools", md, err, ReasonGuestInfoMissing)
	}
	if ok, err := c.InstanceExists(ctx, node); err != nil || !ok {
		t.Errorf("InstanceExists = %v, %v; want true", ok, err)
	}
}

func TestOutageIsNeverGone(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	c := newCloud(t, []*sim{s})
	ctx := context.Background()
	gone := vms[0]
	s.destroy(t, gone)
	s.down.Store(true)
	for _, node := range []*corev1.Node{newNode("gone", withVM(gone)), newNode("here", withVM(vms[1])), newNode("new", withSystemUUID(vms[2].uuid))} {
		exists, err := c.InstanceExists(ctx, node)
		if err == nil {
			t.Errorf("InstanceExists(%s) with vCenter down = %v, nil; want an error", node.Name, exists)
		}
		if md, err := c.InstanceMetadata(ctx, node); err == nil {
			t.Errorf("InstanceMetadata(%s) with vCenter down = %v, nil; want an error", node.Name, md)
		}
	}
	s.down.Store(false)
	// The failure is remembered for a few seconds (lookups fail fast
	// instead of each waiting for the vCenter), then retried.
	deadline := time.Now().Add(15 * time.Second)
	for {
		exists, err := c.InstanceExists(ctx, newNode("gone", withVM(gone)))
		if err == nil && !exists {
			break
		}
		if err == nil || time.Now().After(deadline) {
			t.Fatalf("after recovery InstanceExists(gone) = %v, %v; want false, nil", exists, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if exists, err := c.InstanceExists(ctx, newNode("here", withVM(vms[1]))); err != nil || !exists {
		t.Errorf("after recovery InstanceExists(here) = %v, %v; want true, nil", exists, err)
	}
}

func TestMultipleVCenters(t *testing.T) {
	a, b := startSim(t), startSim(t)
	randomizeUUIDs(t, b)
	avms, bvms := guestAll(t, a, 1), guestAll(t, b, 2)
	c := newCloud(t, []*sim{a, b})
	ctx := context.Background()
	for _, v := range []vm{avms[0], bvms[0]} {
		if ok, err := c.InstanceExists(ctx, newNode("n", withVM(v))); err != nil || !ok {
			t.Errorf("InstanceExists(%s) = %v, %v; want true", v.name, ok, err)
		}
	}
	t.Run("one down", func(t *testing.T) {
		b.down.Store(true)
		defer b.down.Store(false)
		for _, v := range c.vcenters {
			v.invalidate()
		}
		md, err := c.InstanceMetadata(ctx, newNode("n", withSystemUUID(avms[1].uuid)))
		if err != nil || md.ProviderID != ProviderIDPrefix+avms[1].uuid {
			t.Errorf("InstanceMetadata in the healthy vCenter = %v, %v", md, err)
		}
		if ok, err := c.InstanceExists(ctx, newNode("n", withProviderID(ProviderIDPrefix+"00000000-0000-0000-0000-000000000009"))); err == nil {
			t.Errorf("InstanceExists for a VM in neither, one vCenter down = %v, nil; want an error", ok)
		}
		if _, err := c.InstanceMetadata(ctx, newNode(strings.ToLower(avms[2].name))); err == nil {
			t.Errorf("matching by name alone while a vCenter is down succeeded; want an error")
		}
	})
	t.Run("same UUID in both", func(t *testing.T) {
		// Forget b's remembered failure rather than wait out the backoff.
		c.vcenters[1].inv.ForgetFailure()
		dup := cloneVM(t, b, bvms[1], "dup")
		b.reconfigure(t, dup, typesUUID(avms[3].uuid))
		_, err := c.InstanceExists(ctx, newNode("n", withVM(avms[3])))
		if ue, ok := backends.AsUserError(err); !ok || ue.Reason != ReasonNodeAmbiguous {
			t.Errorf("InstanceExists with the UUID in two vCenters: %v; want a %s error", err, ReasonNodeAmbiguous)
		}
	})
}

func TestConcurrentMissesShareOneRefresh(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	c := newCloud(t, []*sim{s})
	ctx := context.Background()
	if _, err := c.InstanceMetadata(ctx, newNode("warm", withVM(vms[0]))); err != nil {
		t.Fatal(err)
	}
	c.vcenters[0].invalidate()
	before := refreshes(t, c.vcenters[0])
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = c.InstanceMetadata(ctx, newNode("n", withVM(vms[i%len(vms)])))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := refreshes(t, c.vcenters[0]) - before; n != 1 {
		t.Errorf("50 concurrent lookups on a cold cache cost %v refreshes, want 1", n)
	}
}

func TestSessionReestablished(t *testing.T) {
	s, vms := zonedSim(t)
	c := newCloud(t, []*sim{s}, withZones())
	ctx := context.Background()
	node := newNode("n", withVM(vms[0]))
	v := c.vcenters[0]
	logins0 := logins(t, v) // a vCenter port an earlier test used
	if _, err := c.InstanceMetadata(ctx, node); err != nil {
		t.Fatal(err)
	}
	conn, err := v.connection(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Expire both sessions server-side, as vCenter does after idling.
	if err := conn.rest.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sessionManager(conn).Logout(ctx); err != nil {
		t.Fatal(err)
	}
	v.invalidate()
	md, err := c.InstanceMetadata(ctx, node)
	if err != nil {
		t.Fatalf("InstanceMetadata after the sessions expired: %v", err)
	}
	if md.Zone == "" {
		t.Errorf("zone lost after the tagging session expired")
	}
	if n := logins(t, v) - logins0; n != 2 {
		t.Errorf("%v logins, want 2 (the first and one after expiry)", n)
	}
}

func TestInstanceNotFoundFromMetadata(t *testing.T) {
	s := startSim(t)
	c := newCloud(t, []*sim{s})
	_, err := c.InstanceMetadata(context.Background(), newNode("n", withProviderID(ProviderIDPrefix+"00000000-0000-0000-0000-000000000009")))
	if !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("InstanceMetadata for a missing VM: %v; want InstanceNotFound", err)
	}
}

// TestMissOfOldNodeCostsNoRefresh: a node created long before the cached
// inventory whose VM is not in it is gone without another retrieval; a node
// created a moment ago still makes a miss refresh.
func TestMissOfOldNodeCostsNoRefresh(t *testing.T) {
	s := startSim(t)
	vms := s.vms(t, "DC0")
	c := newCloud(t, []*sim{s})
	ctx := context.Background()
	if ok, err := c.InstanceExists(ctx, newNode("a", withVM(vms[0]))); err != nil || !ok {
		t.Fatalf("warming the cache: %v, %v", ok, err)
	}
	missing := withProviderID(ProviderIDPrefix + "00000000-0000-4000-8000-000000000001")
	created := func(ago time.Duration) nodeTweak {
		return func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(time.Now().Add(-ago)) }
	}
	v := c.vcenters[0]
	for _, tt := range []struct {
		name          string
		node          *corev1.Node
		wantRefreshes float64
	}{
		{"old node", newNode("old", missing, created(time.Hour)), 0},
		{"new node", newNode("new", missing, created(time.Second)), 1},
		{"node of unknown age", newNode("unknown", missing), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := refreshes(t, v)
			ok, err := c.InstanceExists(ctx, tt.node)
			if err != nil || ok {
				t.Fatalf("InstanceExists = %v, %v; want false", ok, err)
			}
			if n := refreshes(t, v) - before; n != tt.wantRefreshes {
				t.Errorf("%v refreshes, want %v", n, tt.wantRefreshes)
			}
		})
	}
	// An old node's VM destroyed after the cache was filled is still
	// found until the next refresh: a miss is only trusted from an
	// inventory that lacks the VM.
	s.destroy(t, vms[1])
	if ok, err := c.InstanceExists(ctx, newNode("b", withVM(vms[1]), created(time.Hour))); err != nil || !ok {
		t.Errorf("InstanceExists from the cache = %v, %v; want true until the next refresh", ok, err)
	}
	v.invalidate()
	if ok, err := c.InstanceExists(ctx, newNode("b", withVM(vms[1]), created(time.Hour))); err != nil || ok {
		t.Errorf("InstanceExists after a refresh = %v, %v; want false", ok, err)
	}
}

// TestMoveBetweenVCentersIsNotGone: a VM that moved from one vCenter to
// another between their retrievals is missing from both cached
// inventories; that is not taken as gone, both are retrieved again together.
func TestMoveBetweenVCentersIsNotGone(t *testing.T) {
	a, b := startSim(t), startSim(t)
	randomizeUUIDs(t, b)
	avms, bvms := a.vms(t, "DC0"), b.vms(t, "DC0")
	c := newCloud(t, []*sim{a, b})
	ctx := context.Background()
	old := func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour)) }
	node := newNode("mover", withVM(avms[0]), old)
	if ok, err := c.InstanceExists(ctx, node); err != nil || !ok {
		t.Fatalf("before the move: %v, %v", ok, err)
	}
	time.Sleep(maxSnapshotSpread + 100*time.Millisecond)
	// The move: the VM leaves a and arrives in b with its BIOS UUID.
	a.destroy(t, avms[0])
	b.reconfigure(t, bvms[0], typesUUID(avms[0].uuid))
	// a's inventory is retrieved after the move, b's is from before it.
	c.vcenters[0].invalidate()
	before := refreshes(t, c.vcenters[1])
	if ok, err := c.InstanceExists(ctx, node); err != nil || !ok {
		t.Errorf("after the move: InstanceExists = %v, %v; want true (found in the other vCenter)", ok, err)
	}
	if n := refreshes(t, c.vcenters[1]) - before; n != 1 {
		t.Errorf("the other vCenter was retrieved %v times, want 1", n)
	}
}

// TestStuckVCenterHitsTheDeadline: a vCenter that accepts requests and never
// answers makes calls fail within their deadline (twice requestTimeout plus
// a second), as errors, while the other vCenter's nodes are still served.
func TestStuckVCenterHitsTheDeadline(t *testing.T) {
	a, b := startSim(t), startSim(t)
	randomizeUUIDs(t, b)
	avms, bvms := guestAll(t, a, 1), guestAll(t, b, 2)
	c := newCloud(t, []*sim{a, b}, func(sj *settingsJSON) { sj.RequestTimeout = "1s" })
	b.hang.Store(true)
	ctx := context.Background()
	for i, tt := range []struct {
		node    *corev1.Node
		wantErr bool
	}{
		{newNode("stuck", withVM(bvms[0])), true},
		{newNode("healthy", withVM(avms[0])), false},
		{newNode("stuck-again", withVM(bvms[1])), true},
	} {
		held := b.held.Load()
		defer func() {
			// After the first call, the stuck vCenter's failure is
			// remembered: the others do not wait for it again.
			if n := b.held.Load() - held; i > 0 && n != 0 {
				t.Errorf("call %d sent %d more requests to the stuck vCenter, want 0 within the failure backoff", i, n)
			}
		}()
		began := time.Now()
		exists, err := c.InstanceExists(ctx, tt.node)
		took := time.Since(began)
		if tt.wantErr && err == nil {
			t.Errorf("InstanceExists(%s) with its vCenter stuck = %v, nil; want an error", tt.node.Name, exists)
		}
		if !tt.wantErr && (err != nil || !exists) {
			t.Errorf("InstanceExists(%s) = %v, %v; want true", tt.node.Name, exists, err)
		}
		if took > 4*time.Second {
			t.Errorf("InstanceExists(%s) took %v, want at most the 3 s deadline (and a little)", tt.node.Name, took)
		}
	}
	// The backend gives up on the stuck requests (each refresh is bounded
	// by requestTimeout): none is left waiting.
	deadline := time.Now().Add(5 * time.Second)
	for b.hanging.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still waiting on the stuck vCenter 5 s after the calls returned", b.hanging.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestInitializeKeepsTheInventoryFresh: after Initialize the inventory is
// refreshed every refreshInterval with no lookups (which keeps the session
// alive), and stopping logs out.
func TestInitializeKeepsTheInventoryFresh(t *testing.T) {
	s := startSim(t)
	c := newCloud(t, []*sim{s}, fastRefresh)
	stop := make(chan struct{})
	v := c.vcenters[0]
	refreshes0, logins0 := refreshes(t, v), logins(t, v) // a vCenter port an earlier test used
	c.Initialize(nil, stop)
	deadline := time.Now().Add(10 * time.Second)
	for refreshes(t, v)-refreshes0 < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%v background refreshes in 10 s with a 1 s interval", refreshes(t, v)-refreshes0)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := logins(t, v) - logins0; n != 1 {
		t.Errorf("%v logins for %v refreshes, want 1: the session is kept", n, refreshes(t, v)-refreshes0)
	}
	close(stop)
	for {
		v.connMu.Lock()
		conn := v.conn
		v.connMu.Unlock()
		if conn == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still logged in 10 s after stop")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

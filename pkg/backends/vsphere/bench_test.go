package vsphere

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/vsphere/vsid"
)

// BenchmarkNodeSweep measures a full node sweep (InstanceMetadata for every
// node, as the upstream node controller runs every 5 minutes) at 100 and
// 1,000 VMs: the backend's cached path (zones and regions from tags
// included), with its inventory refreshed once per sweep (the worst case: a sweep every 5 minutes outlives a 1-minute
// refresh interval), beside a naive per-node lookup (FindByUuid and a
// property read per node) in the same run. roundtrips/sweep counts the
// HTTP requests that reach the simulator. The 1,000-VM case is skipped
// under -short.
func BenchmarkNodeSweep(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("vms=%d", n), func(b *testing.B) {
			if n > 100 && testing.Short() {
				b.Skip("1,000 VMs take a while to create; skipped under -short")
			}
			s, nodes := benchInventory(b, n)
			b.Run("cached", func(b *testing.B) { benchCached(b, s, nodes) })
			b.Run("naive", func(b *testing.B) { benchNaive(b, s, nodes) })
		})
	}
}

func benchCached(b *testing.B, s *sim, nodes []*corev1.Node) {
	c := newCloud(b, []*sim{s}, withZones())
	ctx := context.Background()
	// Log in once first: a session outlives many sweeps.
	if _, err := c.InstanceMetadata(ctx, nodes[0]); err != nil {
		b.Fatal(err)
	}
	start, cpu := s.requests.Load(), cpuTime(b)
	for b.Loop() {
		c.vcenters[0].invalidate()
		for _, node := range nodes {
			md, err := c.InstanceMetadata(ctx, node)
			if err != nil {
				b.Fatal(err)
			}
			if md.Zone == "" || md.Region == "" {
				b.Fatalf("%s: no zone or region in %+v", node.Name, md)
			}
		}
	}
	reportRoundTrips(b, s.requests.Load()-start, cpuTime(b)-cpu, len(nodes))
}

func benchNaive(b *testing.B, s *sim, nodes []*corev1.Node) {
	ctx := context.Background()
	u, err := url.Parse(s.proxy.URL + "/sdk")
	if err != nil {
		b.Fatal(err)
	}
	u.User = url.UserPassword(simUser, simPassword)
	client, err := govmomi.NewClient(ctx, u, true)
	if err != nil {
		b.Fatal(err)
	}
	dc, err := find.NewFinder(client.Client, false).Datacenter(ctx, "DC0")
	if err != nil {
		b.Fatal(err)
	}
	idx := object.NewSearchIndex(client.Client)
	start, cpu := s.requests.Load(), cpuTime(b)
	for b.Loop() {
		for _, node := range nodes {
			naiveLookup(ctx, b, client, idx, dc, node)
		}
	}
	reportRoundTrips(b, s.requests.Load()-start, cpuTime(b)-cpu, len(nodes))
}

// naiveLookup is what a provider without a cache does per node.
func naiveLookup(ctx context.Context, b *testing.B, client *govmomi.Client, idx *object.SearchIndex, dc *object.Datacenter, node *corev1.Node) {
	uuid, err := vsid.UUIDFromProviderID(node.Spec.ProviderID)
	if err != nil {
		b.Fatal(err)
	}
	ref, err := idx.FindByUuid(ctx, dc, uuid, true, nil)
	if err != nil || ref == nil {
		b.Fatalf("FindByUuid %s: %v", uuid, err)
	}
	var vm mo.VirtualMachine
	if err := client.RetrieveOne(ctx, ref.Reference(), vmProperties, &vm); err != nil {
		b.Fatal(err)
	}
}

// reportRoundTrips reports the round-trips per sweep and node, the wall
// time per sweep and the CPU time per sweep (the process's, the in-process
// simulator's work included: on a shared machine it tracks the work better
// than the wall time).
func reportRoundTrips(b *testing.B, requests int64, cpu time.Duration, nodes int) {
	b.ReportMetric(float64(requests)/float64(b.N), "roundtrips/sweep")
	b.ReportMetric(float64(requests)/float64(b.N)/float64(nodes), "roundtrips/node")
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/sweep")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/sweep")
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchInventory starts a simulator holding n VMs with guest addresses,
// created concurrently through the API (the simulator's own model builds
// VMs one at a time, ~36 s for 1,000), and returns a node per VM.
func benchInventory(b *testing.B, n int) (*sim, []*corev1.Node) {
	b.Helper()
	s := startSim(b, withClusters(2, 2, 1))
	s.tag(b, "k8s-region", "region-1", "/DC0")
	s.tag(b, "k8s-zone", "zone-a", "/DC0/host/DC0_C0")
	s.tag(b, "k8s-zone", "zone-b", "/DC0/host/DC0_C1")
	ctx := context.Background()
	existing := s.vms(b, "DC0")
	for i, v := range existing {
		s.setGuest(b, v, benchIP(i), "")
	}
	pools := benchPools(b, s)
	folders, err := object.NewDatacenter(s.client.Client, s.ref(b, "/DC0")).Folders(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	uuids := make([]string, 0, n)
	for _, v := range existing {
		uuids = append(uuids, v.uuid)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(50)
	for i := len(existing); i < n; i++ {
		g.Go(func() error {
			u, err := benchCreateVM(gctx, folders.VmFolder, pools[i%len(pools)], i)
			mu.Lock()
			uuids = append(uuids, u)
			mu.Unlock()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	nodes := make([]*corev1.Node, 0, len(uuids))
	for i, u := range uuids {
		nodes = append(nodes, newNode(fmt.Sprintf("node-%d", i), withProviderID(ProviderIDPrefix+u)))
	}
	return s, nodes
}

func benchIP(i int) string { return fmt.Sprintf("10.%d.%d.%d", i/62500%250, i/250%250, i%250+1) }

func benchPools(b *testing.B, s *sim) []*object.ResourcePool {
	b.Helper()
	f := find.NewFinder(s.client.Client, false)
	dc, err := f.Datacenter(context.Background(), "DC0")
	if err != nil {
		b.Fatal(err)
	}
	f.SetDatacenter(dc)
	pools, err := f.ResourcePoolList(context.Background(), "*")
	if err != nil {
		b.Fatal(err)
	}
	return pools
}

// benchCreateVM creates a VM with a guest address set through ExtraConfig
// and returns its BIOS UUID.
func benchCreateVM(ctx context.Context, folder *object.Folder, pool *object.ResourcePool, i int) (string, error) {
	spec := types.VirtualMachineConfigSpec{
		Name:     fmt.Sprintf("bench-%04d", i),
		GuestId:  string(types.VirtualMachineGuestOsIdentifierUbuntu64Guest),
		NumCPUs:  4,
		MemoryMB: 8192,
		Files:    &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"},
		ExtraConfig: []types.BaseOptionValue{
			&types.OptionValue{Key: "SET.guest.ipAddress", Value: benchIP(i)},
			&types.OptionValue{Key: "SET.guest.hostName", Value: fmt.Sprintf("bench-%04d", i)},
		},
	}
	task, err := folder.CreateVM(ctx, spec, pool, nil)
	if err != nil {
		return "", err
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		return "", fmt.Errorf("creating VM %d: %w", i, err)
	}
	vm := object.NewVirtualMachine(folder.Client(), info.Result.(types.ManagedObjectReference))
	var o mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config.uuid"}, &o); err != nil {
		return "", err
	}
	return o.Config.Uuid, nil
}

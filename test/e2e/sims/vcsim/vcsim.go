// Package vcsim starts an in-process vCenter simulator (govmomi's simulator
// package with its vAPI tagging endpoints) shaped for multicloud-ccm's
// end-to-end tests and demo: N powered-on VMs spread across clusters, one
// cluster per zone, with zone and region tags, guest addresses and DNS names
// set through the API as VMware Tools would report them, and a random BIOS
// UUID per VM (the simulator's own UUIDs derive from names, so two
// simulators would share them).
//
// The simulator serves HTTPS with a self-signed certificate; the rendered
// backend config trusts it by caFile (or, with Backend.PinThumbprint, by
// thumbprint), so the CCM verifies the server the way a production config
// does, without insecure: true.
//
// Usage:
//
//	sim, err := vcsim.Start(ctx, vcsim.Options{VMs: 4})
//	if err != nil { ... }
//	defer sim.Close()
//	b := sim.Backend("onprem")           // a type: vsphere backend for the simulator
//	cfg := "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: demo\nbackends:\n" + b.YAML()
//	// start the CCM with cfg and b.Env() (the credentials' environment)
//	for _, vm := range sim.VMs {
//		// vm.Name, vm.UUID (lower case), vm.ProviderID(), vm.IP, vm.HostName, vm.Zone, vm.Region
//	}
//
// What a Simulator offers:
//
//   - URL, CAFile, Thumbprint, User, Password, ZoneCategory,
//     RegionCategory (and the constant Datacenter): how to reach and log in
//     to it.
//   - VMs: the VMs it holds, sorted by name ("vm-0", "vm-1", ...; the
//     prefix is Options.NamePrefix). VM i runs on cluster i mod
//     len(Options.Zones), whose zone tag is Options.Zones[i mod len(Zones)];
//     the datacenter carries the region tag. Guest IPs are
//     Options.Subnet's host i+1 (10.20.0.1, 10.20.0.2, ...), guest DNS names
//     equal the VM names.
//   - Backend(name) / Backend.YAML() / Backend.Env(): the backends list
//     entry of a cloud-config (credentials read from environment variables,
//     TLS verified with caFile) and the environment the CCM needs for it.
//   - PowerOff, PowerOn, Destroy, AddVM (optionally without guest info, as
//     a VM whose VMware Tools are not running): changes through the API.
//   - SetPasswords: the passwords it accepts from now on (a password
//     rotated), and the logins it refused since.
//   - Client: a logged-in govmomi client for anything else.
//
// Start takes about a second for a handful of VMs; VMs are created through
// the API 32 at a time (about 1 s per 100 VMs on 2 cores).
package vcsim

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/sync/errgroup"

	_ "github.com/vmware/govmomi/vapi/simulator" // the vAPI (tagging) endpoints
)

// Options shapes a simulator. The zero value is valid: 4 VMs in two zones.
type Options struct {
	// VMs is how many VMs to create (default 4).
	VMs int
	// Zones names one cluster's zone each (default zone-a, zone-b). VMs are
	// spread round-robin across the clusters.
	Zones []string
	// HostsPerCluster is the number of hosts in each cluster (default 2).
	HostsPerCluster int
	// Region is the region tag on the datacenter (default region-1).
	Region string
	// ZoneCategory and RegionCategory name the tag categories (default
	// k8s-zone and k8s-region).
	ZoneCategory, RegionCategory string
	// NamePrefix starts every VM name (default "vm-").
	NamePrefix string
	// Subnet holds the guest IPs, VM i getting host i+1 (default
	// 10.20.0.0/16).
	Subnet string
	// User and Password are the credentials the simulator accepts (default
	// ccm@vsphere.local and a random password).
	User, Password string
	// CPUs and MemoryMB size every VM (default 2 and 4096).
	CPUs, MemoryMB int32
	// GuestID is every VM's guest OS (default ubuntu64Guest).
	GuestID string
}

func (o *Options) setDefaults() {
	if o.VMs == 0 {
		o.VMs = 4
	}
	if len(o.Zones) == 0 {
		o.Zones = []string{"zone-a", "zone-b"}
	}
	if o.HostsPerCluster == 0 {
		o.HostsPerCluster = 2
	}
	if o.Region == "" {
		o.Region = "region-1"
	}
	if o.ZoneCategory == "" {
		o.ZoneCategory = "k8s-zone"
	}
	if o.RegionCategory == "" {
		o.RegionCategory = "k8s-region"
	}
	if o.NamePrefix == "" {
		o.NamePrefix = "vm-"
	}
	if o.Subnet == "" {
		o.Subnet = "10.20.0.0/16"
	}
	if o.User == "" {
		o.User = "ccm@vsphere.local"
	}
	if o.Password == "" {
		o.Password = "vcsim-" + rand.Text()
	}
	if o.CPUs == 0 {
		o.CPUs = 2
	}
	if o.MemoryMB == 0 {
		o.MemoryMB = 4096
	}
	if o.GuestID == "" {
		o.GuestID = string(types.VirtualMachineGuestOsIdentifierUbuntu64Guest)
	}
}

// Datacenter is the simulator's one datacenter.
const Datacenter = "DC0"

// VM is one simulated VM as a caller sees it.
type VM struct {
	// Name is the VM's inventory name, also its guest DNS name.
	Name string
	// UUID is the BIOS UUID, lower case.
	UUID string
	// IP is the guest's address ("" for a VM added without guest info).
	IP string
	// HostName is the guest's DNS name ("" without guest info).
	HostName string
	// Cluster and Host are the names of the VM's cluster and host.
	Cluster, Host string
	// Zone and Region are what the tags on its cluster and datacenter say.
	Zone, Region string
	// Ref is the VM's managed object reference.
	Ref types.ManagedObjectReference
}

// ProviderID is the VM's providerID as the vsphere backend writes it.
func (v VM) ProviderID() string { return "vsphere://" + v.UUID }

// Simulator is a running vCenter simulator.
type Simulator struct {
	// URL is the SDK endpoint, https://127.0.0.1:<port>/sdk.
	URL string
	// Thumbprint is the SHA-256 fingerprint of the server's certificate.
	Thumbprint string
	// CAFile is a PEM file holding the server's self-signed certificate
	// (valid for 127.0.0.1), removed by Close.
	CAFile string
	// User and Password are the accepted credentials.
	User, Password string
	// ZoneCategory and RegionCategory name the topology tag categories.
	ZoneCategory, RegionCategory string
	// VMs are the simulator's VMs, sorted by name. AddVM and Destroy
	// replace the slice: one a caller already holds never changes under it.
	VMs []VM
	// Client is a logged-in client, for changes the helpers do not cover.
	Client *govmomi.Client

	opts     Options
	model    *simulator.Model
	server   *simulator.Server
	subnet   netip.Prefix
	clusters []cluster
	dc       *object.Datacenter
	folder   *object.Folder
	mu       sync.Mutex
	closed   bool
	// valid are the passwords SetPasswords accepts; refused counts the
	// logins its check refused, by password.
	valid   []string
	refused map[string]int
}

// cluster is one simulated cluster with its zone, pool and hosts.
type cluster struct {
	name  string
	zone  string
	ref   types.ManagedObjectReference
	pool  *object.ResourcePool
	hosts []*object.HostSystem
}

// Start creates and starts a simulator. Close stops it.
func Start(ctx context.Context, opts Options) (*Simulator, error) {
	opts.setDefaults()
	subnet, err := netip.ParsePrefix(opts.Subnet)
	if err != nil || !subnet.Addr().Is4() {
		return nil, fmt.Errorf("vcsim: Subnet %q must be an IPv4 CIDR, e.g. 10.20.0.0/16", opts.Subnet)
	}
	if opts.VMs < 0 || opts.VMs >= 1<<(32-subnet.Bits())-2 {
		return nil, fmt.Errorf("vcsim: %d VMs do not fit in %s", opts.VMs, subnet)
	}
	m := simulator.VPX()
	m.Datacenter, m.Cluster, m.ClusterHost, m.Host, m.Machine = 1, len(opts.Zones), opts.HostsPerCluster, 0, 0
	if err := m.Create(); err != nil {
		return nil, fmt.Errorf("vcsim: creating the model: %w", err)
	}
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{User: url.UserPassword(opts.User, opts.Password)}
	m.Service.RegisterEndpoints = true
	s := &Simulator{
		User: opts.User, Password: opts.Password,
		ZoneCategory: opts.ZoneCategory, RegionCategory: opts.RegionCategory,
		opts: opts, model: m, server: m.Service.NewServer(), subnet: subnet.Masked(),
	}
	s.URL = s.server.URL.Scheme + "://" + s.server.URL.Host + "/sdk"
	s.Thumbprint = soap.ThumbprintSHA256(s.server.Certificate())
	if s.CAFile, err = s.server.CertificateFile(); err != nil {
		s.Close()
		return nil, fmt.Errorf("vcsim: writing the certificate: %w", err)
	}
	if err := s.setUp(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Simulator) setUp(ctx context.Context) error {
	u := *s.server.URL
	u.User = url.UserPassword(s.User, s.Password)
	c, err := govmomi.NewClient(ctx, &u, true)
	if err != nil {
		return fmt.Errorf("vcsim: logging in: %w", err)
	}
	s.Client = c
	if err := s.loadClusters(ctx); err != nil {
		return err
	}
	if err := s.tagTopology(ctx); err != nil {
		return err
	}
	return s.createVMs(ctx)
}

// loadClusters finds the model's clusters, their pools and hosts.
func (s *Simulator) loadClusters(ctx context.Context) error {
	f := find.NewFinder(s.Client.Client, false)
	dc, err := f.Datacenter(ctx, Datacenter)
	if err != nil {
		return fmt.Errorf("vcsim: %w", err)
	}
	f.SetDatacenter(dc)
	folders, err := dc.Folders(ctx)
	if err != nil {
		return fmt.Errorf("vcsim: %w", err)
	}
	s.dc, s.folder = dc, folders.VmFolder
	for i, zone := range s.opts.Zones {
		name := fmt.Sprintf("%s_C%d", Datacenter, i)
		cr, err := f.ClusterComputeResource(ctx, name)
		if err != nil {
			return fmt.Errorf("vcsim: cluster %s: %w", name, err)
		}
		pool, err := cr.ResourcePool(ctx)
		if err != nil {
			return fmt.Errorf("vcsim: pool of %s: %w", name, err)
		}
		hosts, err := cr.Hosts(ctx)
		if err != nil {
			return fmt.Errorf("vcsim: hosts of %s: %w", name, err)
		}
		sort.Slice(hosts, func(a, b int) bool { return hosts[a].Name() < hosts[b].Name() })
		s.clusters = append(s.clusters, cluster{name: name, zone: zone, ref: cr.Reference(), pool: pool, hosts: hosts})
	}
	return nil
}

// tagTopology tags the datacenter with the region and each cluster with
// its zone.
func (s *Simulator) tagTopology(ctx context.Context) error {
	rc := rest.NewClient(s.Client.Client)
	if err := rc.Login(ctx, url.UserPassword(s.User, s.Password)); err != nil {
		return fmt.Errorf("vcsim: logging in to the tagging service: %w", err)
	}
	defer func() { _ = rc.Logout(context.WithoutCancel(ctx)) }()
	m := tags.NewManager(rc)
	regionTag, err := createTag(ctx, m, s.opts.RegionCategory, []string{s.opts.Region})
	if err != nil {
		return err
	}
	zoneTags, err := createTag(ctx, m, s.opts.ZoneCategory, s.opts.Zones)
	if err != nil {
		return err
	}
	if err := m.AttachTag(ctx, regionTag[s.opts.Region], s.dc.Reference()); err != nil {
		return fmt.Errorf("vcsim: tagging %s: %w", Datacenter, err)
	}
	for _, c := range s.clusters {
		if err := m.AttachTag(ctx, zoneTags[c.zone], c.ref); err != nil {
			return fmt.Errorf("vcsim: tagging %s: %w", c.name, err)
		}
	}
	return nil
}

// createTag creates a category and one tag per name (names may repeat),
// returning tag IDs by name.
func createTag(ctx context.Context, m *tags.Manager, category string, names []string) (map[string]string, error) {
	catID, err := m.CreateCategory(ctx, &tags.Category{Name: category, Cardinality: "SINGLE", AssociableTypes: []string{}})
	if err != nil {
		return nil, fmt.Errorf("vcsim: creating tag category %s: %w", category, err)
	}
	ids := map[string]string{}
	for _, n := range names {
		if _, ok := ids[n]; ok {
			continue
		}
		id, err := m.CreateTag(ctx, &tags.Tag{Name: n, CategoryID: catID})
		if err != nil {
			return nil, fmt.Errorf("vcsim: creating tag %s: %w", n, err)
		}
		ids[n] = id
	}
	return ids, nil
}

// createVMs creates the VMs, 32 at a time.
func (s *Simulator) createVMs(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range s.opts.VMs {
		g.Go(func() error {
			_, err := s.addVM(gctx, i, fmt.Sprintf("%s%d", s.opts.NamePrefix, i), true)
			return err
		})
	}
	return g.Wait()
}

// AddVM creates and powers on one more VM on cluster index mod the number
// of zones. With guest false its guest reports no address or DNS name, as a
// VM whose VMware Tools are not running.
func (s *Simulator) AddVM(ctx context.Context, name string, index int, guest bool) (VM, error) {
	return s.addVM(ctx, index, name, guest)
}

func (s *Simulator) addVM(ctx context.Context, i int, name string, guest bool) (VM, error) {
	c := s.clusters[i%len(s.clusters)]
	host := c.hosts[(i/len(s.clusters))%len(c.hosts)]
	v := VM{Name: name, UUID: newUUID(), Cluster: c.name, Host: host.Name(), Zone: c.zone, Region: s.opts.Region}
	spec := types.VirtualMachineConfigSpec{
		Name: name, Uuid: v.UUID,
		GuestId: s.opts.GuestID, NumCPUs: s.opts.CPUs, MemoryMB: int64(s.opts.MemoryMB),
		Files: &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"},
	}
	if guest {
		v.IP, v.HostName = s.ip(i), name
		spec.ExtraConfig = []types.BaseOptionValue{
			&types.OptionValue{Key: "SET.guest.ipAddress", Value: v.IP},
			&types.OptionValue{Key: "SET.guest.hostName", Value: v.HostName},
		}
	}
	ref, err := waitResult(ctx, "creating VM "+name)(s.folder.CreateVM(ctx, spec, c.pool, host))
	if err != nil {
		return VM{}, err
	}
	v.Ref = ref
	obj := object.NewVirtualMachine(s.Client.Client, ref)
	if _, err := waitResult(ctx, "powering on "+name)(obj.PowerOn(ctx)); err != nil {
		return VM{}, err
	}
	s.mu.Lock()
	vms := append(slices.Clone(s.VMs), v)
	sort.Slice(vms, func(a, b int) bool { return vmLess(vms[a].Name, vms[b].Name) })
	s.VMs = vms
	s.mu.Unlock()
	return v, nil
}

// vmLess orders names with numeric suffixes numerically (vm-2 < vm-10).
func vmLess(a, b string) bool {
	if len(a) != len(b) {
		pa, pb := strings.TrimRight(a, "0123456789"), strings.TrimRight(b, "0123456789")
		if pa == pb {
			return len(a) < len(b)
		}
	}
	return a < b
}

// ip is the subnet's host i+1.
func (s *Simulator) ip(i int) string {
	a := s.subnet.Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n += uint32(i) + 1 // #nosec G115 -- i is bounded by the subnet's size in Start.
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}).String()
}

// VM returns the VM named name.
func (s *Simulator) VM(name string) (VM, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.VMs {
		if v.Name == name {
			return v, true
		}
	}
	return VM{}, false
}

func (s *Simulator) object(name string) (*object.VirtualMachine, error) {
	v, ok := s.VM(name)
	if !ok {
		return nil, fmt.Errorf("vcsim: no VM named %s", name)
	}
	return object.NewVirtualMachine(s.Client.Client, v.Ref), nil
}

// PowerOff powers the VM off.
func (s *Simulator) PowerOff(ctx context.Context, name string) error {
	obj, err := s.object(name)
	if err != nil {
		return err
	}
	_, err = waitResult(ctx, "powering off "+name)(obj.PowerOff(ctx))
	return err
}

// PowerOn powers the VM on.
func (s *Simulator) PowerOn(ctx context.Context, name string) error {
	obj, err := s.object(name)
	if err != nil {
		return err
	}
	_, err = waitResult(ctx, "powering on "+name)(obj.PowerOn(ctx))
	return err
}

// Destroy powers the VM off, if on, and destroys it.
func (s *Simulator) Destroy(ctx context.Context, name string) error {
	obj, err := s.object(name)
	if err != nil {
		return err
	}
	if st, err := obj.PowerState(ctx); err == nil && st == types.VirtualMachinePowerStatePoweredOn {
		if err := s.PowerOff(ctx, name); err != nil {
			return err
		}
	}
	if _, err := waitResult(ctx, "destroying "+name)(obj.Destroy(ctx)); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, v := range s.VMs {
		if v.Name == name {
			s.VMs = slices.Delete(slices.Clone(s.VMs), i, i+1)
			break
		}
	}
	return nil
}

// waitResult waits for a task and returns its result reference, if any.
func waitResult(ctx context.Context, what string) func(*object.Task, error) (types.ManagedObjectReference, error) {
	return func(task *object.Task, err error) (types.ManagedObjectReference, error) {
		if err != nil {
			return types.ManagedObjectReference{}, fmt.Errorf("vcsim: %s: %w", what, err)
		}
		info, err := task.WaitForResult(ctx)
		if err != nil {
			return types.ManagedObjectReference{}, fmt.Errorf("vcsim: %s: %w", what, err)
		}
		ref, _ := info.Result.(types.ManagedObjectReference)
		return ref, nil
	}
}

// SetPasswords makes the simulator accept its user with any of passwords
// (SOAP and REST logins alike), and refuse every other login, as vCenter
// does once a password is changed; sessions already logged in stay. It
// returns a function reporting how many logins were refused since, by the
// password they tried.
func (s *Simulator) SetPasswords(passwords ...string) func() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.valid = slices.Clone(passwords)
	if s.refused == nil {
		// Installed once, before any login it judges; later calls change
		// only the passwords it reads under the lock.
		s.refused = map[string]int{}
		s.model.Map().SessionManager().ValidLogin = func(req *types.Login) bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			ok := req.UserName == s.User && slices.Contains(s.valid, req.Password)
			if !ok {
				s.refused[req.Password]++
			}
			return ok
		}
	}
	return func() map[string]int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return maps.Clone(s.refused)
	}
}

// Close stops the simulator. It is safe to call more than once.
func (s *Simulator) Close() {
	s.mu.Lock()
	closed := s.closed
	s.closed = true
	s.mu.Unlock()
	if closed {
		return
	}
	if s.Client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.Client.Logout(ctx)
		cancel()
	}
	s.server.Close()
	s.model.Remove()
}

// newUUID is a random (version 4) UUID, lower case.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

package vsphere

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/vsphere/vsconfig"

	_ "github.com/vmware/govmomi/vapi/simulator" // the vAPI (tagging) endpoints of the simulator
)

const (
	simUser     = "k8s@vsphere.local"
	simPassword = "s3cret"
)

// sim is one in-process vCenter simulator behind a proxy that counts the
// requests reaching it and can simulate an outage.
type sim struct {
	model  *simulator.Model
	server *simulator.Server
	proxy  *httptest.Server
	// down makes the proxy drop every connection, as an unreachable vCenter.
	down atomic.Bool
	// hang makes the proxy hold every request without answering until the
	// client gives up, as a vCenter that accepts connections but is stuck.
	hang atomic.Bool
	// hanging counts the requests the proxy is holding, held all it has
	// held.
	hanging, held atomic.Int64
	// release ends every held request (at cleanup).
	release chan struct{}
	// requests counts the HTTP requests (SOAP and vAPI) that reached it.
	requests atomic.Int64
	// throttle, when set, answers requests in the simulator's stead, as
	// a vCenter (or the load balancer in front of it) throttling.
	throttle atomic.Pointer[throttleRule]

	client *govmomi.Client
	rest   *rest.Client
}

// simSetup is what a simOption tweaks before the simulator starts.
type simSetup struct {
	model *simulator.Model
	tls   bool
}

// simOption tweaks the simulator before it starts.
type simOption func(*simSetup)

func withClusters(clusters, hostsPerCluster, vmsPerCluster int) simOption {
	return func(s *simSetup) {
		s.model.Cluster, s.model.ClusterHost, s.model.Machine, s.model.Host = clusters, hostsPerCluster, vmsPerCluster, 0
	}
}

// withTLS serves the simulator over HTTPS with a self-signed certificate.
func withTLS() simOption { return func(s *simSetup) { s.tls = true } }

// simCreate serialises the simulators' creation: govmomi's simulator
// builds each model from package-level state, not made for two creations
// at once (without the lock, -race reported the conformance clauses run
// side by side: LicenseManager.init appends to the package's EvalLicense
// while another creation's add-host task reads it, govmomi v0.52.0); so
// tests running side by side (t.Parallel) start their simulators one at a
// time. Each simulator then has a registry of its own.
var simCreate sync.Mutex

// startSim starts a VPX simulator (by default one datacenter, two clusters
// of two hosts, three VMs per cluster) and logs a client in.
func startSim(t testing.TB, opts ...simOption) *sim {
	t.Helper()
	simCreate.Lock()
	m := simulator.VPX()
	m.Datacenter, m.Cluster, m.ClusterHost, m.Host, m.Machine = 1, 2, 2, 0, 3
	setup := &simSetup{model: m}
	for _, o := range opts {
		o(setup)
	}
	if err := m.Create(); err != nil {
		simCreate.Unlock()
		t.Fatalf("creating the simulator: %v", err)
	}
	if setup.tls {
		m.Service.TLS = new(tls.Config)
	}
	m.Service.Listen = &url.URL{User: url.UserPassword(simUser, simPassword)}
	m.Service.RegisterEndpoints = true
	s := &sim{model: m, server: m.Service.NewServer()}
	simCreate.Unlock()
	t.Cleanup(func() {
		s.server.Close()
		m.Remove()
	})
	s.startProxy(t)
	s.login(t)
	return s
}

func (s *sim) startProxy(t testing.TB) {
	target, err := url.Parse(s.server.URL.String())
	if err != nil {
		t.Fatal(err)
	}
	target.Path, target.User = "", nil
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
	s.proxy = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.down.Load() {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		if s.hang.Load() {
			s.held.Add(1)
			s.hanging.Add(1)
			defer s.hanging.Add(-1)
			// Read the request first: only then does the server notice
			// the client closing the connection (and cancel r's context).
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-s.release:
			}
			return
		}
		if rule := s.throttle.Load(); rule != nil && rule.answer(w, r) {
			return
		}
		s.requests.Add(1)
		rp.ServeHTTP(w, r)
	}))
	// The thumbprint check refuses the certificate once before pinning
	// it; the server need not log each such handshake.
	s.proxy.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.proxy.StartTLS()
	s.release = make(chan struct{})
	t.Cleanup(s.proxy.Close)
	t.Cleanup(func() { close(s.release) })
}

func (s *sim) login(t testing.TB) {
	ctx := context.Background()
	u := *s.server.URL
	u.User = url.UserPassword(simUser, simPassword)
	c, err := govmomi.NewClient(ctx, &u, true)
	if err != nil {
		t.Fatalf("logging in to the simulator: %v", err)
	}
	s.client = c
	s.rest = rest.NewClient(c.Client)
	if err := s.rest.Login(ctx, u.User); err != nil {
		t.Fatalf("logging in to the simulator's vAPI: %v", err)
	}
}

// host is the proxy's host:port, the server the backend is configured with.
func (s *sim) host() string { return strings.TrimPrefix(s.proxy.URL, "https://") }

// thumbprint is the SHA-256 fingerprint of the proxy's certificate.
func (s *sim) thumbprint() string { return soap.ThumbprintSHA256(s.proxy.Certificate()) }

// vm is a simulator VM as a test sees it.
type vm struct {
	obj  *object.VirtualMachine
	name string
	uuid string
}

// vms lists the simulator's VMs in a datacenter, sorted by name.
func (s *sim) vms(t testing.TB, dc string) []vm {
	t.Helper()
	ctx := context.Background()
	f := find.NewFinder(s.client.Client, false)
	d, err := f.Datacenter(ctx, dc)
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(d)
	list, err := f.VirtualMachineList(ctx, "*")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]vm, 0, len(list))
	for _, o := range list {
		out = append(out, vm{obj: o, name: o.Name(), uuid: strings.ToLower(o.UUID(ctx))})
	}
	return out
}

// setGuest sets a VM's guest IP and DNS name through the API, as VMware
// Tools would report them.
func (s *sim) setGuest(t testing.TB, v vm, ip, hostname string) {
	t.Helper()
	var opts []types.BaseOptionValue
	if ip != "" {
		opts = append(opts, &types.OptionValue{Key: "SET.guest.ipAddress", Value: ip})
	}
	if hostname != "" {
		opts = append(opts, &types.OptionValue{Key: "SET.guest.hostName", Value: hostname})
	}
	s.reconfigure(t, v, types.VirtualMachineConfigSpec{ExtraConfig: opts})
}

func (s *sim) reconfigure(t testing.TB, v vm, spec types.VirtualMachineConfigSpec) {
	t.Helper()
	ctx := context.Background()
	task, err := v.obj.Reconfigure(ctx, spec)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("reconfiguring VM %s: %v", v.name, err)
	}
}

func (s *sim) powerOff(t testing.TB, v vm) {
	t.Helper()
	ctx := context.Background()
	task, err := v.obj.PowerOff(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("powering off %s: %v", v.name, err)
	}
}

func (s *sim) destroy(t testing.TB, v vm) {
	t.Helper()
	ctx := context.Background()
	if st, _ := v.obj.PowerState(ctx); st == types.VirtualMachinePowerStatePoweredOn {
		s.powerOff(t, v)
	}
	task, err := v.obj.Destroy(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("destroying %s: %v", v.name, err)
	}
}

// tag creates (once) a category and a tag in it, and attaches the tag to
// the object at path (a datacenter, cluster or host inventory path).
func (s *sim) tag(t testing.TB, category, tag, path string) {
	t.Helper()
	ctx := context.Background()
	m := tags.NewManager(s.rest)
	var catID string
	if c, err := m.GetCategory(ctx, category); err == nil {
		catID = c.ID
	} else if catID, err = m.CreateCategory(ctx, &tags.Category{Name: category, Cardinality: "SINGLE", AssociableTypes: []string{}}); err != nil {
		t.Fatalf("creating category %s: %v", category, err)
	}
	tagID := ""
	if tg, err := m.GetTagForCategory(ctx, tag, catID); err == nil {
		tagID = tg.ID
	} else if tagID, err = m.CreateTag(ctx, &tags.Tag{Name: tag, CategoryID: catID}); err != nil {
		t.Fatalf("creating tag %s: %v", tag, err)
	}
	ref := s.ref(t, path)
	if err := m.AttachTag(ctx, tagID, ref); err != nil {
		t.Fatalf("attaching %s to %s: %v", tag, path, err)
	}
}

// ref finds an inventory object by path, e.g. /DC0/host/DC0_C0.
func (s *sim) ref(t testing.TB, path string) types.ManagedObjectReference {
	t.Helper()
	ref, err := object.NewSearchIndex(s.client.Client).FindByInventoryPath(context.Background(), path)
	if err != nil || ref == nil {
		t.Fatalf("finding %s: %v", path, err)
	}
	return ref.Reference()
}

// settingsJSON is the vsphere section for a set of simulators.
type settingsJSON struct {
	VCenters        []map[string]any `json:"vcenters"`
	ZoneCategory    string           `json:"zoneCategory,omitempty"`
	RegionCategory  string           `json:"regionCategory,omitempty"`
	Addresses       map[string]any   `json:"addresses,omitempty"`
	RefreshInterval string           `json:"refreshInterval,omitempty"`
	RequestTimeout  string           `json:"requestTimeout,omitempty"`
	RateLimits      map[string]any   `json:"rateLimits,omitempty"`
}

// credentialFiles writes a username and password file and returns the
// folder holding them.
func credentialFiles(t testing.TB, user, password string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range map[string]string{"user": user, "password": password} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// vcenterEntry is a vcenters entry for a simulator reached through its
// proxy over HTTPS, its certificate pinned by thumbprint.
func vcenterEntry(s *sim, dcs ...string) map[string]any {
	if len(dcs) == 0 {
		dcs = []string{"DC0"}
	}
	return map[string]any{
		"server":      "https://" + s.host(),
		"thumbprint":  s.thumbprint(),
		"datacenters": dcs,
		"username":    map[string]string{"file": "user"},
		"password":    map[string]string{"file": "password"},
	}
}

// settingsTweak changes the section before it is parsed.
type settingsTweak func(*settingsJSON)

func withZones() settingsTweak {
	return func(s *settingsJSON) { s.ZoneCategory, s.RegionCategory = "k8s-zone", "k8s-region" }
}

// parseSettings parses a vsphere section as the config file would.
func parseSettings(t testing.TB, dir string, sj settingsJSON) *Settings {
	t.Helper()
	raw, err := json.Marshal(sj)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := vsconfig.ParseSection(raw, field.NewPath("backends").Index(0).Child("vsphere"), dir)
	if len(errs) > 0 {
		t.Fatalf("parsing settings: %v", errs.ToAggregate())
	}
	return v.(*Settings)
}

// newCloud builds a backend for the simulators with the default credentials.
func newCloud(t testing.TB, sims []*sim, tweaks ...settingsTweak) *Cloud {
	t.Helper()
	dir := credentialFiles(t, simUser, simPassword)
	sj := settingsJSON{RequestTimeout: "10s"}
	for _, s := range sims {
		sj.VCenters = append(sj.VCenters, vcenterEntry(s))
	}
	for _, tw := range tweaks {
		tw(&sj)
	}
	return newCloudFrom(t, parseSettings(t, dir, sj))
}

func newCloudFrom(t testing.TB, s *Settings) *Cloud {
	t.Helper()
	c, err := New(context.Background(), newOptions(s))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	cloud := c.(*Cloud)
	t.Cleanup(func() { cloud.close(context.Background()) })
	return cloud
}

func newOptions(s *Settings) backends.Options {
	return backends.Options{Name: "onprem", ClusterID: "test", Settings: s}
}

// The shared Node builders of internal/testutil.
type nodeTweak = testutil.NodeTweak

var (
	newNode        = testutil.NewNode
	withProviderID = testutil.WithProviderID
)

func withVM(v vm) nodeTweak { return withProviderID(ProviderIDPrefix + v.uuid) }

func withSystemUUID(u string) nodeTweak {
	return func(n *corev1.Node) { n.Status.NodeInfo.SystemUUID = u }
}

func withAddress(typ corev1.NodeAddressType, addr string) nodeTweak {
	return func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: typ, Address: addr})
	}
}

// guestAll gives every VM of the simulator a guest address 10.<net>.0.<i+1>
// and a DNS name equal to its VM name, and returns the VMs.
func guestAll(t testing.TB, s *sim, netByte int) []vm {
	t.Helper()
	vms := s.vms(t, "DC0")
	var wg sync.WaitGroup
	for i, v := range vms {
		wg.Go(func() { s.setGuest(t, v, fmt.Sprintf("10.%d.0.%d", netByte, i+1), strings.ToLower(v.name)) })
	}
	wg.Wait()
	return vms
}

// freePort returns a loopback address nothing listens on.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// cloneVM clones v into the same folder, powered on, and returns the clone.
func cloneVM(t testing.TB, s *sim, v vm, name string) vm {
	t.Helper()
	ctx := context.Background()
	folders, err := object.NewDatacenter(s.client.Client, s.ref(t, "/DC0")).Folders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	task, err := v.obj.Clone(ctx, folders.VmFolder, name, types.VirtualMachineCloneSpec{PowerOn: true})
	if err != nil {
		t.Fatal(err)
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		t.Fatalf("cloning %s: %v", v.name, err)
	}
	obj := object.NewVirtualMachine(s.client.Client, info.Result.(types.ManagedObjectReference))
	return vm{obj: obj, name: name, uuid: strings.ToLower(obj.UUID(ctx))}
}

// typesUUID is a spec setting a VM's BIOS UUID.
func typesUUID(u string) types.VirtualMachineConfigSpec {
	return types.VirtualMachineConfigSpec{Uuid: u}
}

func sessionManager(c *connection) *session.Manager { return session.NewManager(c.vim) }

func itoa(i int) string { return strconv.Itoa(i) }

func equalAddrs(a, b []corev1.NodeAddress) bool {
	return slices.Equal(a, b)
}

// randomizeUUIDs gives every VM of the simulator a new random BIOS UUID:
// simulators derive UUIDs from names, so two simulators would share them.
func randomizeUUIDs(t testing.TB, s *sim) {
	t.Helper()
	for _, v := range s.vms(t, "DC0") {
		s.reconfigure(t, v, typesUUID(randomUUID(t)))
	}
}

func randomUUID(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// makeUnreadable clears the VM's configuration on the simulator's own
// object, as vCenter returns a VM whose files (datastore) it cannot reach:
// config unset, the rest (name, runtime) still there. restore puts it back.
func (s *sim) makeUnreadable(t testing.TB, v vm) (restore func()) {
	t.Helper()
	ctx := s.model.Service.Context
	obj, ok := ctx.Map.Get(v.obj.Reference()).(*simulator.VirtualMachine)
	if !ok {
		t.Fatalf("VM %s is not in the simulator", v.name)
	}
	var saved *types.VirtualMachineConfigInfo
	ctx.WithLock(obj, func() { saved, obj.Config = obj.Config, nil })
	return func() { ctx.WithLock(obj, func() { obj.Config = saved }) }
}

// throttleRule answers the next Count requests that match it with Status
// (and Retry-After, if set) instead of the simulator: SOAP calls of
// Method (every SOAP call if empty), or vAPI requests whose path holds
// VAPIPath.
type throttleRule struct {
	Status     int
	RetryAfter string
	Method     string
	VAPIPath   string
	Count      atomic.Int64
	// Answered counts the requests it answered.
	Answered atomic.Int64
}

// throttleNext makes the proxy answer the next count requests matching
// rule with its status, and returns the rule.
func (s *sim) throttleNext(t testing.TB, count int, rule *throttleRule) *throttleRule {
	t.Helper()
	rule.Count.Store(int64(count))
	s.throttle.Store(rule)
	t.Cleanup(func() { s.throttle.CompareAndSwap(rule, nil) })
	return rule
}

// answer answers r if it matches and the rule has answers left; it leaves
// r's body readable for the simulator otherwise.
func (rule *throttleRule) answer(w http.ResponseWriter, r *http.Request) bool {
	if !rule.matches(r) || rule.Count.Add(-1) < 0 {
		return false
	}
	rule.Answered.Add(1)
	if rule.RetryAfter != "" {
		w.Header().Set("Retry-After", rule.RetryAfter)
	}
	http.Error(w, http.StatusText(rule.Status), rule.Status)
	return true
}

func (rule *throttleRule) matches(r *http.Request) bool {
	if rule.VAPIPath != "" {
		return strings.Contains(r.URL.Path, rule.VAPIPath)
	}
	if !strings.HasPrefix(r.URL.Path, "/sdk") {
		return false
	}
	if rule.Method == "" {
		return true
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return err == nil && bytes.Contains(body, []byte("<"+rule.Method+" "))
}

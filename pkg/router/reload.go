package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/controller-manager/pkg/healthz"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
)

// Reloadable is the multicloud provider over a configuration that changes
// while the process runs. Each configuration is one Router, a generation;
// Apply builds the next one and swaps it in atomically. Every call is
// served by exactly one generation from start to end: a call in flight
// when a new configuration is applied finishes on the one it started on.
// Every generation shares the Reloadable's per-Service and per-Node state
// (process.Shared, with its svcstate.States), so a call in flight on a retired generation
// and one on the new generation take the same per-Service lock.
//
// Backends whose settings and referenced files are unchanged are carried
// into the next generation as they are (caches, clients, the bare-metal
// allocator and its informer handlers all stay). A backend whose settings
// changed is rebuilt, or, when it implements Reconfigurer, changed in
// place. A backend no generation in use holds any more is stopped (its
// Initialize stop channel closes) once the last call on it has returned.
//
// Which capabilities the provider offers (instances, load balancers,
// routes) is decided by the configuration it starts with: upstream starts
// its controllers once.
type Reloadable struct {
	cur atomic.Pointer[generation]

	// mu serialises Apply, Initialize and SetInformers, and guards what
	// follows.
	mu            sync.Mutex
	clientBuilder cloudprovider.ControllerClientBuilder
	factory       informers.SharedInformerFactory
	stop          <-chan struct{}
	// lives holds every backend cloud in use by some generation.
	lives map[cloudprovider.Interface]*life
	// fingerprints identify the settings the current generation's backends
	// were built from, by name; files, the files those settings reference.
	fingerprints, files map[string]string
	// caps are the capabilities of the first generation.
	instances, lbs, routes bool

	// st is the per-Service and per-Node state, shared by every
	// generation and never rebuilt (see package process).
	st *process.Shared

	// retiring counts the replaced generations not ended yet (see
	// Retiring).
	retiring atomic.Int64
}

// Reconfigurer is a backend that can take new settings of its own type in
// place, keeping state a rebuild would lose (the bare-metal allocator's
// leases). PrepareReconfigure checks the settings and returns the backend
// as it will be once apply has run, changing nothing; apply is called only
// when the whole new configuration is about to be swapped in. next may
// share state with the receiver (it is carried into the next generation and
// receives Initialize and SetInformers, which must tolerate that).
type Reconfigurer interface {
	PrepareReconfigure(ctx context.Context, o backends.Options) (next cloudprovider.Interface, apply func(), err error)
}

// Retuner is a backend that can take, in place, a change of settings that
// concerns none of its load balancers or nodes (the AWS backend's API
// budget, rateLimits): PrepareRetune reports whether o differs from the
// backend's settings only so, changing nothing; apply makes the change.
// The router asks only when the files the settings reference are
// unchanged. A retuned backend is carried into the next generation as it
// is (caches, clients, what it last verified of each load balancer) and
// reported in Changes.Retuned, not Reconfigured: no Service is re-synced
// for it.
type Retuner interface {
	PrepareRetune(ctx context.Context, o backends.Options) (apply func(), ok bool, err error)
}

// generation is one configuration's router and the calls it serves.
type generation struct {
	r      *Router
	clouds []cloudprovider.Interface
	stop   *stopper

	inflight atomic.Int64
	retired  atomic.Bool
	finish   sync.Once
	owner    *Reloadable
}

// life is one backend cloud's stop channel, closed when no generation in
// use holds the cloud.
type life struct {
	refs int
	stop *stopper
}

// stopper is a channel closed once.
type stopper struct {
	ch   chan struct{}
	once sync.Once
}

func newStopper() *stopper { return &stopper{ch: make(chan struct{})} }

func (s *stopper) close() { s.once.Do(func() { close(s.ch) }) }

var (
	_ cloudprovider.Interface    = (*Reloadable)(nil)
	_ cloudprovider.InstancesV2  = (*Reloadable)(nil)
	_ cloudprovider.LoadBalancer = (*Reloadable)(nil)
	_ cloudprovider.Routes       = (*Reloadable)(nil)
	_ cloudprovider.InformerUser = (*Reloadable)(nil)
)

// NewReloadable builds every backend cfg lists and returns the provider
// over them, ready for Apply.
func NewReloadable(ctx context.Context, cfg *config.CloudConfig) (*Reloadable, error) {
	rl := &Reloadable{lives: map[cloudprovider.Interface]*life{}, fingerprints: map[string]string{}, files: map[string]string{}, st: process.New()}
	rl.st.Current = func() (process.Configuration, func()) {
		g := rl.acquire()
		return g.r.lb, g.release
	}
	g, ch, err := rl.build(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	rl.instances, rl.lbs, rl.routes = len(g.r.InstanceBackends) > 0, len(g.r.lbs) > 0, len(g.r.RouteBackends) > 0
	rl.fingerprints, rl.files = ch.fingerprints, ch.files
	rl.adopt(g)
	rl.cur.Store(g)
	return rl, nil
}

// Current returns the router of the configuration in use, for tests and
// diagnostics; calls should go through the Reloadable.
func (rl *Reloadable) Current() *Router { return rl.cur.Load().r }

// Changes says what Apply changed, by backend name.
type Changes struct {
	Added, Rebuilt, Reconfigured, Removed []string
	// Retuned are the backends that took a change of settings concerning
	// none of their load balancers in place (Retuner): none of their
	// Services needs a sync for it.
	Retuned []string

	// Rerouted lists the LoadBalancer Services whose target (the backend
	// or class that should serve them, see lbTarget) the new configuration
	// changed: a default backend changed, a backend their annotation or
	// class names added or removed, a class added or removed; and those
	// whose record names a backend the configuration added back (its load
	// balancer there, left while it was removed, is retired). Classless
	// ones get a full sync through the router's re-sync (see
	// lifecycle.Rerouted: the router's own under upstream's controller, or
	// handed to the controller that syncs them, SetServiceSync); a
	// controller serving
	// classed ones re-syncs those itself. Empty before the informers are
	// set.
	Rerouted []types.NamespacedName
	// Retargeted is how many LoadBalancer Services Apply queued for the
	// router's re-sync because the configuration may change which nodes
	// their load balancers target (NodeTargetsChanged): those the
	// controller that syncs Services itself does not serve (SetServed).
	Retargeted int

	applies             []func()
	fingerprints, files map[string]string
}

// Empty reports whether no backend changed.
func (c Changes) Empty() bool {
	return len(c.Added)+len(c.Rebuilt)+len(c.Reconfigured)+len(c.Retuned)+len(c.Removed) == 0
}

// Apply makes cfg the configuration in use. Nothing changes when it fails:
// the previous configuration keeps serving. The new generation is started
// (Initialize and SetInformers, as far as the provider has had them) before
// it serves its first call.
func (rl *Reloadable) Apply(ctx context.Context, cfg *config.CloudConfig) (Changes, error) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	old := rl.cur.Load()
	g, ch, err := rl.build(ctx, cfg, old)
	if err != nil {
		return Changes{}, err
	}
	for _, apply := range ch.applies {
		apply()
	}
	rl.adopt(g)
	rl.start(g)
	rl.fingerprints, rl.files = ch.fingerprints, ch.files
	rl.cur.Store(g)
	old.retire()
	backend.ForgetHealth(ch.Removed)
	ch.Rerouted = lifecycle.Rerouted(rl.st, old.r.lb, g.r.lb)
	if ch.NodeTargetsChanged(old.r.Cfg, cfg) {
		ch.Retargeted = lifecycle.Retarget(rl.st, old.r.lb, g.r.lb, ch.Rerouted)
	}
	return ch, nil
}

// NodeTargetsChanged reports whether a reload from prev to next, which
// made these changes to the backends, may change which nodes a backend's
// load balancers target (the router's OwnNodes and Targetable):
// loadBalancer.targetOtherCCMsNodes, the platforms served (nodes.platforms,
// nodes.schemes, and the backends configured, whose types are platforms),
// whose node a node without providerID is (nodes.rules), or a backend's
// own settings (rebuilt or reconfigured; a retuned backend's change
// concerns none of its load balancers). nodes.unmanaged changes no
// target. Such a reload is a node change for every load balancer: Apply
// queues the router's re-sync of the Services upstream's service
// controller serves (lifecycle.Retarget), pkg/lbcontroller runs its node
// sync for its own.
func (c Changes) NodeTargetsChanged(prev, next *config.CloudConfig) bool {
	if len(c.Added)+len(c.Removed)+len(c.Rebuilt)+len(c.Reconfigured) > 0 {
		return true
	}
	p, n := prev.Nodes, next.Nodes
	return prev.LoadBalancer.TargetOtherCCMsNodes != next.LoadBalancer.TargetOtherCCMsNodes ||
		!slices.Equal(p.Platforms, n.Platforms) || (p.Platforms == nil) != (n.Platforms == nil) ||
		!slices.Equal(p.Schemes, n.Schemes) ||
		!slices.EqualFunc(p.Rules, n.Rules, func(a, b config.NodeRule) bool {
			return a.Backend == b.Backend && a.NodeNameRegex == b.NodeNameRegex && maps.Equal(a.MatchLabels, b.MatchLabels)
		})
}

// build makes the generation for cfg, reusing old's backends where their
// fingerprint is unchanged. It starts and changes nothing.
func (rl *Reloadable) build(ctx context.Context, cfg *config.CloudConfig, old *generation) (*generation, Changes, error) {
	ch := Changes{fingerprints: map[string]string{}, files: map[string]string{}}
	bs := make([]*backend.Member, 0, len(cfg.Backends))
	for _, bc := range cfg.Backends {
		b, err := rl.backendFor(ctx, cfg, bc, old, &ch)
		if err != nil {
			return nil, Changes{}, fmt.Errorf("backend %s: %w", bc.Name, err)
		}
		bs = append(bs, b)
	}
	if old != nil {
		for _, b := range old.r.backends {
			if _, kept := ch.fingerprints[b.Name]; !kept {
				ch.Removed = append(ch.Removed, b.Name)
			}
		}
	}
	r, err := assemble(cfg, bs, rl.st)
	if err != nil {
		return nil, Changes{}, err
	}
	g := &generation{r: r, stop: newStopper(), owner: rl}
	for _, b := range bs {
		g.clouds = append(g.clouds, b.Cloud)
	}
	return g, ch, nil
}

// backendFor returns the backend bc describes: old's when unchanged, old's
// reconfigured when it can be, else a new one.
func (rl *Reloadable) backendFor(ctx context.Context, cfg *config.CloudConfig, bc config.Backend, old *generation, ch *Changes) (*backend.Member, error) {
	fp, files := fingerprint(cfg.ClusterID, bc), filesFingerprint(bc)
	ch.fingerprints[bc.Name], ch.files[bc.Name] = fp, files
	reg, ok := backends.Lookup(bc.Type)
	if !ok {
		return nil, fmt.Errorf("type %q is not compiled into this binary (known: %v)", bc.Type, backends.Types())
	}
	opts := backends.Options{Name: bc.Name, ClusterID: cfg.ClusterID, Settings: bc.Settings}
	var prev *backend.Member
	if old != nil {
		prev = old.r.ByName[bc.Name]
	}
	if prev != nil && prev.Type != bc.Type {
		prev = nil
	}
	if prev != nil && rl.fingerprints[bc.Name] == fp {
		return prev, nil
	}
	if rt, ok := cloudOf(prev).(Retuner); ok && rl.files[bc.Name] == files {
		apply, retune, err := rt.PrepareRetune(ctx, opts)
		if err != nil {
			return nil, err
		}
		if retune {
			ch.applies = append(ch.applies, apply)
			ch.Retuned = append(ch.Retuned, bc.Name)
			return prev, nil
		}
	}
	if rc, ok := cloudOf(prev).(Reconfigurer); ok {
		next, apply, err := rc.PrepareReconfigure(ctx, opts)
		if err != nil {
			return nil, err
		}
		ch.applies = append(ch.applies, apply)
		ch.Reconfigured = append(ch.Reconfigured, bc.Name)
		return backend.NewWith(backend.Backend{Name: bc.Name, Type: bc.Type, Scheme: reg.Scheme, Cloud: next}, prev.Health), nil
	}
	cloud, err := reg.New(ctx, opts)
	if err != nil {
		return nil, err
	}
	switch {
	case prev != nil:
		ch.Rebuilt = append(ch.Rebuilt, bc.Name)
	case old != nil:
		ch.Added = append(ch.Added, bc.Name)
	}
	return backend.New(backend.Backend{Name: bc.Name, Type: bc.Type, Scheme: reg.Scheme, Cloud: cloud}), nil
}

func cloudOf(b *backend.Member) cloudprovider.Interface {
	if b == nil {
		return nil
	}
	return b.Cloud
}

// fingerprint identifies a backend's settings: its type, name, section as
// written, the cluster ID and the content of every file it references.
func fingerprint(clusterID string, bc config.Backend) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00", bc.Type, bc.Name, clusterID, bc.Sections[bc.Type], filesFingerprint(bc))
	return hex.EncodeToString(h.Sum(nil))
}

// filesFingerprint identifies the content of the files bc's settings
// reference.
func filesFingerprint(bc config.Backend) string {
	h := sha256.New()
	for _, f := range config.ReferencedFiles(bc.Settings) {
		data, err := os.ReadFile(f) //nolint:gosec // G304: a path from the operator's cloud-config.
		if err != nil {
			fmt.Fprintf(h, "%s\x00error %v\x00", f, err)
			continue
		}
		fmt.Fprintf(h, "%s\x00%x\x00", f, sha256.Sum256(data))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// adopt counts g's clouds as in use, giving new ones a stop channel.
// rl.mu is held (or rl not yet shared).
func (rl *Reloadable) adopt(g *generation) {
	for _, c := range g.clouds {
		l := rl.lives[c]
		if l == nil {
			l = &life{stop: newStopper()}
			rl.lives[c] = l
		}
		l.refs++
	}
}

// start initialises g's router and its new clouds with what the provider
// was given so far. rl.mu is held.
func (rl *Reloadable) start(g *generation) {
	if rl.clientBuilder != nil {
		g.r.initialize(rl.clientBuilder, g.stop.ch)
	}
	if rl.factory != nil {
		g.r.setInformers(rl.factory)
	}
	for _, c := range g.clouds {
		l := rl.lives[c]
		if l.refs != 1 {
			continue // carried over: started already.
		}
		if rl.clientBuilder != nil {
			c.Initialize(rl.clientBuilder, l.stop.ch)
		}
		if u, ok := c.(cloudprovider.InformerUser); ok && rl.factory != nil {
			u.SetInformers(rl.factory)
		}
	}
}

// retire stops g from taking calls; once its last call returns, its router
// stops and its clouds no other generation holds are stopped.
func (g *generation) retire() {
	g.owner.retiring.Add(1)
	g.retired.Store(true)
	if g.inflight.Load() == 0 {
		go g.end()
	}
}

func (g *generation) end() {
	g.finish.Do(func() {
		g.stop.close()
		rl := g.owner
		defer rl.retiring.Add(-1)
		rl.mu.Lock()
		defer rl.mu.Unlock()
		for _, c := range g.clouds {
			l := rl.lives[c]
			if l.refs--; l.refs == 0 {
				l.stop.close()
				delete(rl.lives, c)
			}
		}
	})
}

// Retiring returns how many replaced configurations still serve calls
// begun on them (a call in flight finishes on the configuration it began
// on): while it is above 0, a replaced backend's clients, and so a rotated
// credential's old key, may still be used; at 0 no call can use them any
// more (each replaced backend was stopped, or carried into the
// configuration in use).
func (rl *Reloadable) Retiring() int { return int(rl.retiring.Load()) }

// acquire returns the generation in use, counting a call on it.
func (rl *Reloadable) acquire() *generation {
	for {
		g := rl.cur.Load()
		g.inflight.Add(1)
		if !g.retired.Load() {
			return g
		}
		g.release()
	}
}

// release ends a call counted by acquire.
func (g *generation) release() {
	if g.inflight.Add(-1) == 0 && g.retired.Load() {
		go g.end()
	}
}

// Initialize initialises the router in use and its backends; generations
// applied later are initialised with the same client builder. Each backend
// gets a stop channel of its own, closed when the backend is removed (or
// stop closes).
func (rl *Reloadable) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.clientBuilder, rl.stop = clientBuilder, stop
	rl.st.SetStop(stop)
	g := rl.cur.Load()
	g.r.initialize(clientBuilder, g.stop.ch)
	for _, c := range g.clouds {
		c.Initialize(clientBuilder, rl.lives[c].stop.ch)
	}
	go rl.stopAllOn(stop)
}

// stopAllOn closes every generation's and backend's stop channel when stop
// closes.
func (rl *Reloadable) stopAllOn(stop <-chan struct{}) {
	<-stop
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.cur.Load().stop.close()
	for _, l := range rl.lives {
		l.stop.close()
	}
}

// SetInformers hands the informers to the router in use and its backends,
// and keeps them for generations applied later.
func (rl *Reloadable) SetInformers(factory informers.SharedInformerFactory) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.factory = factory
	g := rl.cur.Load()
	g.r.setInformers(factory)
	for _, c := range g.clouds {
		if u, ok := c.(cloudprovider.InformerUser); ok {
			u.SetInformers(factory)
		}
	}
}

// Instances is not offered (see Router.Instances).
func (rl *Reloadable) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 is offered when the first configuration had instances.
func (rl *Reloadable) InstancesV2() (cloudprovider.InstancesV2, bool) { return rl, rl.instances }

// LoadBalancer is offered when the first configuration had load balancers,
// as upstream's service controller must see it (see upstreamview.go).
func (rl *Reloadable) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	return classAwareBalancer{lb: rl, servesCls: rl.ServesClass, deleteWait: upstreamDeleteWait}, rl.lbs
}

// Routes is offered when the first configuration had routes.
func (rl *Reloadable) Routes() (cloudprovider.Routes, bool) { return rl, rl.routes }

// Zones is not offered.
func (rl *Reloadable) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not offered.
func (rl *Reloadable) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// ProviderName returns "multicloud".
func (rl *Reloadable) ProviderName() string { return ProviderName }

// HasClusterID reports whether the configuration in use has a cluster ID.
func (rl *Reloadable) HasClusterID() bool { return rl.Current().HasClusterID() }

// BackendHealthChecker checks the backends of the configuration in use.
func (rl *Reloadable) BackendHealthChecker() healthz.UnnamedHealthChecker { return reloadHealth{rl} }

type reloadHealth struct{ rl *Reloadable }

func (h reloadHealth) Check(req *http.Request) error {
	g := h.rl.acquire()
	defer g.release()
	return g.r.BackendHealthChecker().Check(req)
}

// InstanceExists is the configuration in use's answer.
func (rl *Reloadable) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	g := rl.acquire()
	defer g.release()
	return g.r.InstanceExists(ctx, node)
}

// InstanceShutdown is the configuration in use's answer.
func (rl *Reloadable) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	g := rl.acquire()
	defer g.release()
	return g.r.InstanceShutdown(ctx, node)
}

// InstanceMetadata is the configuration in use's answer.
func (rl *Reloadable) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	g := rl.acquire()
	defer g.release()
	return g.r.InstanceMetadata(ctx, node)
}

// GetLoadBalancer is the configuration in use's answer.
func (rl *Reloadable) GetLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	g := rl.acquire()
	defer g.release()
	return g.r.GetLoadBalancer(ctx, clusterName, service)
}

// GetLoadBalancerName is the configuration in use's answer.
func (rl *Reloadable) GetLoadBalancerName(ctx context.Context, clusterName string, service *corev1.Service) string {
	g := rl.acquire()
	defer g.release()
	return g.r.GetLoadBalancerName(ctx, clusterName, service)
}

// EnsureLoadBalancer runs on the configuration in use.
func (rl *Reloadable) EnsureLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	g := rl.acquire()
	defer g.release()
	return g.r.EnsureLoadBalancer(ctx, clusterName, service, nodes)
}

// UpdateLoadBalancer runs on the configuration in use.
func (rl *Reloadable) UpdateLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) error {
	g := rl.acquire()
	defer g.release()
	return g.r.UpdateLoadBalancer(ctx, clusterName, service, nodes)
}

// LoadBalancerTargets answers on the configuration in use.
func (rl *Reloadable) LoadBalancerTargets(service *corev1.Service, nodes []*corev1.Node) []*corev1.Node {
	g := rl.acquire()
	defer g.release()
	return g.r.LoadBalancerTargets(service, nodes)
}

// LoadBalancerTargetsByBackend answers on the configuration in use.
func (rl *Reloadable) LoadBalancerTargetsByBackend(service *corev1.Service, nodes []*corev1.Node) map[string][]*corev1.Node {
	g := rl.acquire()
	defer g.release()
	return g.r.LoadBalancerTargetsByBackend(service, nodes)
}

// RetargetsOnAddressChange answers on the configuration in use.
func (rl *Reloadable) RetargetsOnAddressChange(service *corev1.Service, backendName string, old, node *corev1.Node) bool {
	g := rl.acquire()
	defer g.release()
	return g.r.RetargetsOnAddressChange(service, backendName, old, node)
}

// LoadBalancerTargetsEnsured answers on the configuration in use, except
// for an EnsureLoadBalancer that ran on a configuration since replaced:
// that configuration answers, from what the call handed its backends
// (lifecycle.Balancer.LoadBalancerTargetsEnsured), which is what the load
// balancers hold.
func (rl *Reloadable) LoadBalancerTargetsEnsured(dec *Decision, service *corev1.Service, nodes []*corev1.Node) map[string][]*corev1.Node {
	g := rl.acquire()
	defer g.release()
	return g.r.LoadBalancerTargetsEnsured(dec, service, nodes)
}

// EnsureLoadBalancerDeleted runs on the configuration in use.
func (rl *Reloadable) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *corev1.Service) error {
	g := rl.acquire()
	defer g.release()
	return g.r.EnsureLoadBalancerDeleted(ctx, clusterName, service)
}

// ListRoutes is the configuration in use's answer.
func (rl *Reloadable) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	g := rl.acquire()
	defer g.release()
	return g.r.ListRoutes(ctx, clusterName)
}

// CreateRoute runs on the configuration in use.
func (rl *Reloadable) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	g := rl.acquire()
	defer g.release()
	return g.r.CreateRoute(ctx, clusterName, nameHint, route)
}

// DeleteRoute runs on the configuration in use.
func (rl *Reloadable) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	g := rl.acquire()
	defer g.release()
	return g.r.DeleteRoute(ctx, clusterName, route)
}

// ServesClass reports whether the configuration in use serves the class.
func (rl *Reloadable) ServesClass(class string) bool { return rl.Current().ServesClass(class) }

// HasClasses reports whether the configuration in use lists classes.
func (rl *Reloadable) HasClasses() bool { return rl.Current().HasClasses() }

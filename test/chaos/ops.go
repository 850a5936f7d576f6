package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller"
)

// Kind is what an operation does.
type Kind string

// The operations the generator draws.
const (
	// SvcApply creates the Service Name with Shape, or changes it to Shape.
	SvcApply Kind = "svc-apply"
	// SvcDelete deletes the Service.
	SvcDelete Kind = "svc-delete"
	// SvcRecreate removes the cleanup finalizer by hand, deletes the
	// Service and creates it again at once with Shape.
	SvcRecreate Kind = "svc-recreate"
	// StrangerApply creates a classless Service with no annotation whose
	// status another controller (the judge, as MetalLB would) writes: the
	// address Addr, inside our bare-metal pool.
	StrangerApply Kind = "stranger-apply"
	// NodeJoin registers the Node Name of Cloud (with its providerID when
	// Flag, else the CCM must find it).
	NodeJoin Kind = "node-join"
	// NodeLeave deletes the Node, as a drained and removed node is.
	NodeLeave Kind = "node-leave"
	// NodeExclude sets (Flag) or removes the exclusion label.
	NodeExclude Kind = "node-exclude"
	// NodeAddress changes the Node's InternalIP to Addr.
	NodeAddress Kind = "node-address"
	// NodeReady sets the Node's Ready condition to Flag (a kubelet down is
	// false: the lifecycle controller then asks whether its instance exists).
	NodeReady Kind = "node-ready"
	// NodeTerminate terminates the Node's instance behind its back (the AWS
	// instance or the vSphere VM) and marks the Node NotReady.
	NodeTerminate Kind = "node-terminate"
	// Reload writes Config as the live cloud-config.
	Reload Kind = "reload"
	// KillLeader kills the leading replica with SIGKILL and starts a new
	// replica in its place.
	KillLeader Kind = "kill-leader"
	// PauseLeader stops the leading replica (SIGSTOP) for pauseFor, longer
	// than its lease: the standby takes over while the paused one still
	// believes it leads, and once resumed (SIGCONT) it acts on what it saw
	// before, until it finds its lease lost and exits (a replica is then
	// started in its place). A garbage-collection pause or a frozen VM.
	PauseLeader Kind = "pause-leader"
	// AWSThrottle makes the next N AWS calls fail with a throttling error.
	AWSThrottle Kind = "aws-throttle"
	// AWSOutage makes every AWS call answer 503 (Flag) or ends that.
	AWSOutage Kind = "aws-outage"
	// AWSKeyRotate rotates the AWS backend's credentials by a live reload:
	// the fake accepts the old access key and the new one (generation N),
	// the judge writes the new one into the secret files the cloud-config
	// references, and once the leader applied them the fake refuses the old
	// key, as AWS does once a key is deactivated. Nothing of a Service or a
	// Node may change; no request may carry the old key afterwards.
	AWSKeyRotate Kind = "aws-key-rotate"
	// VSphereRotate rotates the vCenter's password (generation N) by a
	// live reload, as AWSKeyRotate does the AWS key: the simulator accepts
	// both passwords, the judge writes the new one into the secret file,
	// and once the leader applied it the simulator refuses the old one
	// (its SessionManager's login check: vcsim.SetPasswords).
	VSphereRotate Kind = "vsphere-password-rotate"
	// OSHang holds the next N mutating Octavia calls past the CCM's
	// request timeout (30 s), then passes them on to Octavia all the
	// same: the change is made and its answer lost (a call timing out).
	OSHang Kind = "os-hang"
	// OSRotate rotates the OpenStack backend's application credential
	// (generation N) by a live reload: the judge creates a new one in
	// Keystone, writes its ID and secret into the cloud-config (the secret
	// in a file of its own), and once the leader applied it deletes the
	// old one, which revokes its tokens (the world's OpenStack only).
	OSRotate Kind = "os-credential-rotate"
	// WatchDelay holds back the leader's watch events for N seconds (a
	// proxy between it and kube-apiserver): its view of the cluster goes
	// stale while it leads (Sieve's stale states).
	WatchDelay Kind = "watch-delay"
	// WatchDrop cuts the leader's watches mid-way: its informers watch
	// again (or list again) and may miss the states in between (Sieve's
	// unobserved states).
	WatchDrop Kind = "watch-drop"
	// OSOutage makes every Octavia call answer 503 (Flag) or ends that
	// (the world's OpenStack only).
	OSOutage Kind = "os-outage"
	// OSFail makes the next N mutating Octavia calls answer 503: one step
	// of a multi-step change fails (the load balancer made, its listener
	// or pool refused).
	OSFail Kind = "os-fail"
)

// Routing annotation and label names the judge sets or reads.
const (
	annBackend   = "multicloud-ccm.io/load-balancer-backend"
	annRecord    = "multicloud-ccm.io/load-balancer-backends"
	annDrain     = "multicloud-ccm.io/load-balancer-drain"
	annDraining  = "multicloud-ccm.io/load-balancer-draining"
	annDNSMark   = "multicloud-ccm.io/load-balancer-dns-target"
	annIPs       = "multicloud-ccm.io/load-balancer-ips"
	annShare     = "multicloud-ccm.io/allow-shared-ip"
	labelExclude = "node.kubernetes.io/exclude-from-external-load-balancers"
	// lbFinalizer is upstream's shared cleanup finalizer (classless
	// Services); classed ones carry lbcontroller.Finalizer.
	lbFinalizer    = "service.kubernetes.io/load-balancer-cleanup"
	classMetal     = "chaos.multicloud-ccm.io/metal"
	classBoth      = "chaos.multicloud-ccm.io/aws-metal"
	reasonUnknown  = "UnknownLoadBalancerBackend"
	condReady      = "LoadBalancerReady"
	condBackend    = "backend.multicloud-ccm.io/"
	serviceNS      = "chaos"
	serviceTypeLB  = "LoadBalancer"
	serviceTypeCIP = "ClusterIP"
)

// Shape is everything the judge sets on one of its Services.
type Shape struct {
	// Type is LoadBalancer or ClusterIP.
	Type string `json:"type"`
	// Backends is the load-balancer-backend annotation ("" for none).
	Backends string `json:"backends,omitempty"`
	// Class is spec.loadBalancerClass ("" for none).
	Class string `json:"class,omitempty"`
	// Ports are the TCP ports.
	Ports []int32 `json:"ports"`
	// Drain is the load-balancer-drain annotation ("" for none).
	Drain string `json:"drain,omitempty"`
	// IPs is the load-balancer-ips annotation ("" for none).
	IPs string `json:"ips,omitempty"`
	// Share is the allow-shared-ip key ("" for none): bare metal lets
	// Services of one key share an address when no port clashes
	// (docs/baremetal.md, "Sharing"). Only the share stream draws it.
	Share string `json:"share,omitempty"`
}

func (s Shape) String() string {
	parts := []string{s.Type}
	if s.Class != "" {
		parts = append(parts, "class="+strings.TrimPrefix(s.Class, "chaos.multicloud-ccm.io/"))
	}
	if s.Backends != "" {
		parts = append(parts, "backend="+s.Backends)
	}
	parts = append(parts, fmt.Sprintf("ports=%v", s.Ports))
	if s.Drain != "" {
		parts = append(parts, "drain="+s.Drain)
	}
	if s.IPs != "" {
		parts = append(parts, "ips="+s.IPs)
	}
	if s.Share != "" {
		parts = append(parts, "share="+s.Share)
	}
	return strings.Join(parts, " ")
}

// Config is the part of the cloud-config the judge changes.
type Config struct {
	// Metal2 configures the second bare-metal backend.
	Metal2 bool `json:"metal2"`
	// Default is loadBalancer.defaultBackend ("" for none).
	Default string `json:"default,omitempty"`
	// Drain is loadBalancer.drainPeriod.
	Drain string `json:"drain"`
	// MetalSmall and Metal2Small shrink each backend's pool to its upper
	// half.
	MetalSmall  bool `json:"metalSmall,omitempty"`
	Metal2Small bool `json:"metal2Small,omitempty"`
	// NoMetalClass and NoBothClass remove the class classMetal (classBoth)
	// from loadBalancer.classes: its Services become another controller's
	// (docs/routing.md: their load balancers are left alone; a deletion is
	// still cleaned up); false adds it back.
	NoMetalClass bool `json:"noMetalClass,omitempty"`
	NoBothClass  bool `json:"noBothClass,omitempty"`
	// OS configures the OpenStack backend os (only in a world with the
	// stack: the generator draws it from the start, never changes it).
	OS bool `json:"os,omitempty"`
}

func (c Config) String() string {
	s := fmt.Sprintf("metal2=%v default=%q drainPeriod=%s metalPool=%s metal2Pool=%s classes=%v",
		c.Metal2, c.Default, c.Drain, poolWord(c.MetalSmall), poolWord(c.Metal2Small), c.classes())
	if c.OS {
		s += " os"
	}
	return s
}

func poolWord(small bool) string {
	if small {
		return "small"
	}
	return "big"
}

// Op is one step of a sequence.
type Op struct {
	Kind   Kind    `json:"kind"`
	Name   string  `json:"name,omitempty"`
	Shape  *Shape  `json:"shape,omitempty"`
	Config *Config `json:"config,omitempty"`
	// Cloud is a Node's cloud: metal, aws or vsphere.
	Cloud string `json:"cloud,omitempty"`
	Flag  bool   `json:"flag,omitempty"`
	Addr  string `json:"addr,omitempty"`
	N     int    `json:"n,omitempty"`
	// Gap is how long the judge lets the system run after the step.
	Gap time.Duration `json:"gap"`
}

func (o Op) String() string {
	var s string
	switch o.Kind {
	case SvcApply, SvcRecreate:
		s = fmt.Sprintf("%s %s: %s", o.Kind, o.Name, o.Shape)
	case StrangerApply:
		s = fmt.Sprintf("%s %s: status %s", o.Kind, o.Name, o.Addr)
	case NodeJoin:
		s = fmt.Sprintf("%s %s (%s, providerID %v)", o.Kind, o.Name, o.Cloud, o.Flag)
	case NodeExclude, NodeReady:
		s = fmt.Sprintf("%s %s %v", o.Kind, o.Name, o.Flag)
	case AWSOutage, OSOutage:
		s = fmt.Sprintf("%s %v", o.Kind, o.Flag)
	case NodeAddress:
		s = fmt.Sprintf("%s %s %s", o.Kind, o.Name, o.Addr)
	case Reload:
		s = fmt.Sprintf("%s: %s", o.Kind, o.Config)
	case AWSThrottle, OSFail, OSHang:
		s = fmt.Sprintf("%s %d calls", o.Kind, o.N)
	case AWSKeyRotate:
		s = fmt.Sprintf("%s to %s", o.Kind, awsKeyID(o.N))
	case VSphereRotate:
		s = fmt.Sprintf("%s to %s", o.Kind, vsPassword(o.N))
	case OSRotate:
		s = fmt.Sprintf("%s to generation %d", o.Kind, o.N)
	case WatchDelay:
		s = fmt.Sprintf("%s %ds", o.Kind, o.N)
	default:
		s = strings.TrimSpace(fmt.Sprintf("%s %s", o.Kind, o.Name))
	}
	return s + fmt.Sprintf(" (+%s)", o.Gap)
}

// The world's fixed parts the generator draws from.
var (
	serviceNames  = []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	strangerNames = []string{"other-0", "other-1"}
	metalNodes    = []string{"bm-1", "bm-2", "bm-3", "bm-4"}
	// baseNodes join before the first step and are never touched: every
	// cloud always has a Node to target.
	baseNodes    = map[string]string{"bm-1": "metal", "aws-0": "aws", "vs-0": "vsphere"}
	drains       = []string{"", "0s", "3s", "6s"}
	configDrains = []string{"0s", "3s", "6s"}
	// requestedIPs lie in metal's pool, big or small.
	requestedIPs = []string{"192.0.2.20", "192.0.2.21", "192.0.2.22"}
	// strangerIPs lie in metal's pool (both sizes), beyond what it hands
	// out before the requested ones.
	strangerIPs = []string{"192.0.2.66", "192.0.2.67"}
)

// InitialConfig is the configuration every run starts with.
func InitialConfig() Config { return Config{Metal2: true, Default: "metal", Drain: "3s"} }

// Features are the optional parts of the world a sequence is drawn for.
type Features struct {
	// OS: the OpenStack stack is up; the backend os is configured, and
	// Services, several-backend Services and faults draw on it.
	OS bool `json:"os,omitempty"`
	// Share: a second random stream (NewShareRand) inserts steps on the
	// sharing Services (shareNames): bare-metal Services carrying
	// allow-shared-ip keys, their ports and requested addresses. Without
	// it a seed draws what it always drew; with it, the same steps with
	// the sharing ones between them (TestGenerateShareKeepsBase).
	Share bool `json:"share,omitempty"`
}

// initialConfig is InitialConfig with the backends f adds.
func (f Features) initialConfig() Config {
	c := InitialConfig()
	c.OS = f.OS
	return c
}

// nodeState is what the generator knows of one Node.
type nodeState struct {
	cloud      string
	present    bool
	terminated bool
	excluded   bool
	ready      bool
}

// generator draws a sequence; it tracks what it created so that most
// steps act on something that exists.
type generator struct {
	rnd    *Rand
	shapes map[string]*Shape
	// prevRouting is each Service's routing before its last move, and
	// prevCfg the configuration before the last reload: moving back (a
	// drain cancelled, a default moved back) is drawn often, for that is
	// where the features meet.
	prevRouting map[string][2]string
	prevCfg     *Config
	strangers   map[string]bool
	nodes       map[string]*nodeState
	cfg         Config
	outage      int // steps left before the outage ends (0: none)
	osOutage    int // the same, of Octavia
	keyGen      int // the credentials' generation (0: the first)
	os          bool
	// srnd is the share stream (nil: Features.Share off) and shared the
	// sharing Services' shapes: nothing the main stream draws reads
	// them, so its draws are the same with sharing or without.
	srnd   *Rand
	shared map[string]*Shape
}

// Generate draws steps operations from seed, for the world without
// OpenStack.
func Generate(seed uint64, steps int) []Op { return GenerateFor(seed, steps, Features{}) }

// GenerateFor draws steps operations from seed for a world with f. Without
// a feature it draws what Generate always drew: the fixed seeds' sequences
// do not change.
func GenerateFor(seed uint64, steps int, f Features) []Op {
	g := &generator{rnd: NewRand(seed), shapes: map[string]*Shape{}, prevRouting: map[string][2]string{}, strangers: map[string]bool{},
		nodes: map[string]*nodeState{}, cfg: f.initialConfig(), os: f.OS, shared: map[string]*Shape{}}
	if f.Share {
		g.srnd = NewShareRand(seed)
	}
	for _, n := range metalNodes {
		g.nodes[n] = &nodeState{cloud: "metal"}
	}
	for _, cloud := range []string{"aws", "vsphere"} {
		for _, n := range cloudNodes[cloud] {
			g.nodes[n] = &nodeState{cloud: cloud}
		}
	}
	for n := range baseNodes {
		delete(g.nodes, n)
	}
	ops := make([]Op, 0, steps)
	for len(ops) < steps {
		// A step on a sharing Service, drawn from the share stream alone:
		// the main stream draws on as it would without it.
		if g.srnd != nil && g.srnd.IntN(100) < shareChance {
			op := g.share()
			op.Gap = time.Duration(100+g.srnd.IntN(1400)) * time.Millisecond
			ops = append(ops, op)
			continue
		}
		op, ok := g.next()
		if !ok {
			continue
		}
		op.Gap = time.Duration(100+g.rnd.IntN(1400)) * time.Millisecond
		ops = append(ops, op)
	}
	return ops
}

func (g *generator) next() (Op, bool) {
	if g.outage > 0 {
		g.outage--
		if g.outage == 0 {
			return Op{Kind: AWSOutage, Flag: false}, true
		}
	}
	if g.osOutage > 0 {
		g.osOutage--
		if g.osOutage == 0 {
			return Op{Kind: OSOutage, Flag: false}, true
		}
	}
	// Octavia's faults draw only with os (the draws without it are those
	// of the fixed seeds).
	if g.os && g.rnd.IntN(100) < 6 {
		if g.rnd.IntN(6) == 0 {
			g.keyGen++
			return Op{Kind: OSRotate, N: g.keyGen}, true
		}
		if g.osOutage > 0 || g.rnd.IntN(3) > 0 {
			if g.rnd.IntN(3) == 0 {
				return Op{Kind: OSHang, N: 1 + g.rnd.IntN(2)}, true
			}
			return Op{Kind: OSFail, N: 1 + g.rnd.IntN(3)}, true
		}
		g.osOutage = 2 + g.rnd.IntN(3)
		return Op{Kind: OSOutage, Flag: true}, true
	}
	switch p := g.rnd.IntN(100); {
	case p < 58:
		return g.service()
	case p < 62:
		return g.stranger()
	case p < 78:
		return g.node()
	case p < 87:
		return g.reload(), true
	case p < 89:
		// A credential rotated: the AWS key or the vCenter's password, one
		// generation counter for both.
		g.keyGen++
		if g.rnd.IntN(2) == 0 {
			return Op{Kind: VSphereRotate, N: g.keyGen}, true
		}
		return Op{Kind: AWSKeyRotate, N: g.keyGen}, true
	case p < 91:
		return Op{Kind: KillLeader}, true
	case p < 93:
		return Op{Kind: PauseLeader}, true
	case p < 95:
		return Op{Kind: WatchDelay, N: 2 + g.rnd.IntN(7)}, true
	case p < 96:
		return Op{Kind: WatchDrop}, true
	case p < 98:
		return Op{Kind: AWSThrottle, N: 10 + g.rnd.IntN(30)}, true
	default:
		if g.outage > 0 {
			return Op{}, false
		}
		g.outage = 2 + g.rnd.IntN(3)
		return Op{Kind: AWSOutage, Flag: true}, true
	}
}

func (g *generator) service() (Op, bool) {
	// Half the steps go to two hot Services, so that one Service sees
	// moves, drains and their cancellations close together.
	names := serviceNames
	if g.rnd.IntN(2) == 0 {
		names = names[:2]
	}
	name := pick(g.rnd, names)
	cur := g.shapes[name]
	if cur == nil {
		s := g.newShape()
		g.shapes[name] = &s
		return Op{Kind: SvcApply, Name: name, Shape: &s}, true
	}
	switch p := g.rnd.IntN(100); {
	case p < 12:
		delete(g.shapes, name)
		return Op{Kind: SvcDelete, Name: name}, true
	case p < 20:
		s := g.newShape()
		g.shapes[name] = &s
		return Op{Kind: SvcRecreate, Name: name, Shape: &s}, true
	}
	s := g.edit(name, *cur)
	g.shapes[name] = &s
	return Op{Kind: SvcApply, Name: name, Shape: &s}, true
}

// routings are the ways a Service is routed: an annotation, a class or
// the default ("").
func (g *generator) routing() (backends, class string) {
	choices := []string{"metal", "aws", "metal,aws", "", "class:" + classMetal, "class:" + classBoth}
	if g.cfg.Metal2 {
		choices = append(choices, "metal2", "metal,metal2", "metal2,aws")
	}
	if g.os {
		choices = append(choices, "os", "os", "metal,os", "aws,os")
	}
	c := pick(g.rnd, choices)
	if cl, ok := strings.CutPrefix(c, "class:"); ok {
		return "", cl
	}
	return c, ""
}

func (g *generator) newShape() Shape {
	s := Shape{Type: serviceTypeLB, Ports: []int32{80}, Drain: pick(g.rnd, drains)}
	s.Backends, s.Class = g.routing()
	g.maybeIPs(&s)
	return s
}

// maybeIPs requests an address for a Service served by metal alone (the
// only backend asked that can honour it), sometimes.
func (g *generator) maybeIPs(s *Shape) {
	s.IPs = ""
	if s.Backends == "metal" && s.Class == "" && g.rnd.IntN(3) == 0 {
		s.IPs = pick(g.rnd, requestedIPs)
	}
}

// edit changes one thing of the shape: its routing (a move, with or
// without a drain), its ports, its drain, its requested address, or its
// type (LoadBalancer to ClusterIP and back).
func (g *generator) edit(name string, s Shape) Shape {
	s.Ports = slices.Clone(s.Ports)
	switch g.rnd.IntN(10) {
	case 0, 1, 2, 3:
		prev, moved := g.prevRouting[name]
		g.prevRouting[name] = [2]string{s.Backends, s.Class}
		if moved && g.rnd.IntN(3) == 0 {
			s.Backends, s.Class = prev[0], prev[1]
		} else {
			s.Backends, s.Class = g.routing()
		}
		g.maybeIPs(&s)
	case 4, 5:
		if len(s.Ports) == 1 {
			s.Ports = append(s.Ports, 443)
		} else {
			s.Ports = s.Ports[:1]
		}
	case 6:
		s.Drain = pick(g.rnd, drains)
	case 7:
		g.maybeIPs(&s)
	default:
		if s.Type == serviceTypeLB {
			s.Type = serviceTypeCIP
		} else {
			s.Type = serviceTypeLB
		}
	}
	return s
}

func (g *generator) stranger() (Op, bool) {
	if g.cfg.Default != "" {
		// Strangers live where no default is set: unset it first.
		c := g.cfg
		c.Default = ""
		g.setConfig(c)
		return Op{Kind: Reload, Config: &c}, true
	}
	i := g.rnd.IntN(len(strangerNames))
	name := strangerNames[i]
	if g.strangers[name] {
		delete(g.strangers, name)
		return Op{Kind: SvcDelete, Name: name}, true
	}
	g.strangers[name] = true
	return Op{Kind: StrangerApply, Name: name, Addr: strangerIPs[i]}, true
}

func (g *generator) node() (Op, bool) {
	names := make([]string, 0, len(g.nodes))
	for n := range g.nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	name := pick(g.rnd, names)
	n := g.nodes[name]
	switch {
	case n.terminated:
		return Op{}, false
	case !n.present:
		n.present, n.ready, n.excluded = true, true, false
		// Bare-metal Nodes may join without a providerID (the CCM finds
		// them in the inventory); the others carry theirs.
		withID := n.cloud != "metal" || g.rnd.IntN(2) == 0
		return Op{Kind: NodeJoin, Name: name, Cloud: n.cloud, Flag: withID}, true
	}
	switch p := g.rnd.IntN(100); {
	case p < 25:
		n.present = false
		return Op{Kind: NodeLeave, Name: name, Cloud: n.cloud}, true
	case p < 45:
		n.excluded = !n.excluded
		return Op{Kind: NodeExclude, Name: name, Cloud: n.cloud, Flag: n.excluded}, true
	case p < 65:
		return Op{Kind: NodeAddress, Name: name, Cloud: n.cloud, Addr: fmt.Sprintf("10.1.%d.%d", g.rnd.IntN(4), 10+g.rnd.IntN(200))}, true
	case p < 88 || n.cloud == "metal":
		n.ready = !n.ready
		return Op{Kind: NodeReady, Name: name, Cloud: n.cloud, Flag: n.ready}, true
	default:
		n.terminated = true
		return Op{Kind: NodeTerminate, Name: name, Cloud: n.cloud}, true
	}
}

// reload changes one thing of the configuration.
func (g *generator) reload() Op {
	c := g.cfg
	if g.prevCfg != nil && g.rnd.IntN(3) == 0 {
		c = *g.prevCfg
		g.setConfig(c)
		return Op{Kind: Reload, Config: &c}
	}
	switch g.rnd.IntN(7) {
	case 0:
		c.Metal2 = !c.Metal2
		if !c.Metal2 && c.Default == "metal2" {
			c.Default = "metal"
		}
	case 1:
		choices := []string{"metal", "aws", ""}
		if c.Metal2 {
			choices = append(choices, "metal2")
		}
		if c.OS {
			choices = append(choices, "os")
		}
		c.Default = pick(g.rnd, choices)
	case 2:
		c.Drain = pick(g.rnd, configDrains)
	case 3:
		c.MetalSmall = !c.MetalSmall
	case 4:
		c.Metal2Small = !c.Metal2Small
	case 5:
		c.NoMetalClass = !c.NoMetalClass
	default:
		c.NoBothClass = !c.NoBothClass
	}
	g.setConfig(c)
	return Op{Kind: Reload, Config: &c}
}

// setConfig makes c the configuration, remembering the one before.
func (g *generator) setConfig(c Config) {
	prev := g.cfg
	g.prevCfg, g.cfg = &prev, c
}

func pick[T any](r *Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// isCleanupFinalizer: one of the two cleanup finalizers our controller
// keeps on a Service (framework.CleanupFinalizer).
func isCleanupFinalizer(f string) bool {
	return f == lbFinalizer || f == lbcontroller.Finalizer
}

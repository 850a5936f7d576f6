package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// KEP-5778 ("explicit node ownership", kubernetes/enhancements#5779): a
// node's platform is its providerID scheme or, before it has one, its
// cloudprovider.kubernetes.io/platform annotation. The router serves the
// platforms of its backends (and of nodes.schemes), restricted by
// nodes.platforms and --cloud-provider-platforms; a node of any other
// platform it knows of (a backend's platform turned off, a platform named
// by the annotation, or any platform once the served ones are declared)
// belongs to another CCM and is left alone: it exists and is running as
// far as the node-lifecycle controller can tell from us, it is never
// initialised, given addresses or labels, routed or (through
// (*Router).ForeignPlatform) targeted.

// flagPlatforms is --cloud-provider-platforms, nil when not given.
var flagPlatforms atomic.Pointer[[]string]

// SetPlatforms restricts the platforms every router serves, as
// --cloud-provider-platforms does; nil lifts the restriction. It applies
// to routers built before and after the call.
func SetPlatforms(platforms []string) {
	if platforms == nil {
		flagPlatforms.Store(nil)
		return
	}
	cp := slices.Clone(platforms)
	flagPlatforms.Store(&cp)
}

// FlagPlatforms returns what SetPlatforms set, nil when nothing.
func FlagPlatforms() []string {
	if p := flagPlatforms.Load(); p != nil {
		return slices.Clone(*p)
	}
	return nil
}

// CheckFlagPlatforms refuses a --cloud-provider-platforms value that cfg
// cannot honour, as config validation refuses the same mistake in
// nodes.platforms: a platform no configured backend (or nodes.schemes
// entry) serves, which is a typo or a backend missing from the config, or
// no platform in common with nodes.platforms. Either would leave nodes of
// ours (every node, in the second case) quietly another CCM's: never
// initialised, with no Warning. It runs for the configuration the process
// starts with and for every reload (a refused reload keeps the old
// configuration serving).
func CheckFlagPlatforms(cfg *config.CloudConfig) error {
	flag := FlagPlatforms()
	if flag == nil {
		return nil
	}
	configured := cfg.ConfiguredPlatforms()
	var problems []string
	for _, p := range flag {
		if !slices.Contains(configured, p) {
			problems = append(problems, fmt.Sprintf("%q is served by no configured backend or nodes.schemes entry", p))
		}
	}
	if l := cfg.Nodes.Platforms; l != nil && !slices.ContainsFunc(flag, func(p string) bool { return slices.Contains(l, p) }) {
		problems = append(problems, fmt.Sprintf("it has no platform in common with nodes.platforms [%s], so this CCM would serve no node", strings.Join(l, ", ")))
	}
	if problems == nil {
		return nil
	}
	return fmt.Errorf("--%s=%s: %s; list only platforms the config serves (%s), or add the backend to the config",
		config.PlatformsFlag, strings.Join(flag, ","), strings.Join(problems, "; "), strings.Join(configured, ", "))
}

// errForeign marks a node that belongs to another CCM.
var errForeign = errors.New("it belongs to another cloud-controller-manager (KEP-5778)")

// ForeignPlatform returns the platform of node and true when node belongs
// to another CCM: Services' load balancers and routes must not target it
// unless the operator asks.
func (r *Nodes) ForeignPlatform(node *corev1.Node) (string, bool) {
	if id := node.Spec.ProviderID; id != "" {
		scheme, err := providerid.Scheme(id)
		if err != nil || r.serves(scheme) {
			return "", false
		}
		return scheme, r.hasPlatform(scheme) || r.platformsDeclared()
	}
	if p := node.Annotations[providerid.PlatformAnnotation]; p != "" {
		return p, !r.serves(p)
	}
	if b := r.chosenBackend(node); b != nil && b.Scheme != "" && !r.serves(b.Scheme) {
		return b.Scheme, true
	}
	return "", false
}

// OwnNodes returns nodes without those of other CCMs: KEP-5778's
// non-goal, a load balancer targets only nodes of its own CCM's clouds.
// It is what load-balancer calls and the node re-sync should hand a
// backend's targeting (see docs/routing.md, "Running beside other CCMs").
// nodes itself is returned, unchanged, when none belongs to another CCM.
func (r *Nodes) OwnNodes(nodes []*corev1.Node) []*corev1.Node {
	if r.Cfg.LoadBalancer.TargetOtherCCMsNodes {
		return nodes
	}
	for i, n := range nodes {
		if _, foreign := r.ForeignPlatform(n); foreign {
			return append(slices.Clip(nodes[:i]), r.ownOf(nodes[i+1:])...)
		}
	}
	return nodes
}

// ownOf is OwnNodes into a new slice.
func (r *Nodes) ownOf(nodes []*corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		if _, foreign := r.ForeignPlatform(n); !foreign {
			out = append(out, n)
		}
	}
	return out
}

// chosenBackend is the backend a node without providerID is given to by
// its backend label or the first matching nodes.rules entry, or nil.
func (r *Nodes) chosenBackend(node *corev1.Node) *backend.Member {
	if name, ok := node.Labels[string(annotation.NodeBackend)]; ok {
		return r.ByName[name]
	}
	for i := range r.Cfg.Nodes.Rules {
		if rule := &r.Cfg.Nodes.Rules[i]; rule.Matches(node.Name, node.Labels) {
			return r.ByName[rule.Backend]
		}
	}
	return nil
}

// foreign returns the error resolve answers for a node of another CCM, or
// nil.
func (r *Nodes) foreign(node *corev1.Node) error {
	p, ok := r.ForeignPlatform(node)
	if !ok {
		return nil
	}
	return fmt.Errorf("node %s: platform %q is not served here (served: %s): %w", node.Name, p, strings.Join(r.ServedPlatforms(), ", "), errForeign)
}

// serves reports whether the router serves platform p: a backend with
// instances (or a nodes.schemes entry) serves it, and neither
// nodes.platforms nor --cloud-provider-platforms leaves it out.
func (r *Nodes) serves(p string) bool {
	if !r.hasPlatform(p) {
		return false
	}
	if l := r.Cfg.Nodes.Platforms; l != nil && !slices.Contains(l, p) {
		return false
	}
	f := flagPlatforms.Load()
	return f == nil || slices.Contains(*f, p)
}

// hasPlatform reports whether a backend with instances serves platform p,
// whether or not it is turned off.
func (r *Nodes) hasPlatform(p string) bool {
	return len(r.ByScheme[p]) > 0 || r.aliasBackend(p) != nil
}

// platformsDeclared reports whether the operator listed the platforms
// served: then every other platform is another CCM's, whatever
// nodes.unmanaged says.
func (r *Nodes) platformsDeclared() bool {
	return r.Cfg.Nodes.Platforms != nil || flagPlatforms.Load() != nil
}

// ServedPlatforms lists, sorted, the platforms the router serves.
func (r *Nodes) ServedPlatforms() []string {
	var out []string
	for s := range r.ByScheme {
		if r.serves(s) {
			out = append(out, s)
		}
	}
	for _, a := range r.Cfg.Nodes.Schemes {
		if r.serves(a.Scheme) {
			out = append(out, a.Scheme)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// aliasBackend returns the backend a nodes.schemes entry gives scheme to,
// when it is configured and has instances.
func (r *Nodes) aliasBackend(scheme string) *backend.Member {
	for _, a := range r.Cfg.Nodes.Schemes {
		if a.Scheme == scheme {
			if b := r.ByName[a.Backend]; b != nil && b.Instances != nil {
				return b
			}
		}
	}
	return nil
}

// servesBackend reports whether nodes may be given to b: it has no
// platform, or its platform is served.
func (r *Nodes) servesBackend(b *backend.Member) bool {
	return b.Scheme == "" || r.serves(b.Scheme)
}

// claimants are the backends asked to claim a node with no providerID:
// those of the platform its annotation names, else every backend whose
// platform is served.
func (r *Nodes) claimants(node *corev1.Node) []*backend.Member {
	p := node.Annotations[providerid.PlatformAnnotation]
	out := make([]*backend.Member, 0, len(r.InstanceBackends))
	for _, b := range r.InstanceBackends {
		if p != "" {
			if b.Scheme == p || r.aliasBackend(p) == b {
				out = append(out, b)
			}
			continue
		}
		if r.servesBackend(b) {
			out = append(out, b)
		}
	}
	return out
}

// platformLabelTimeout bounds the patch writing the platform label.
const platformLabelTimeout = 10 * time.Second

// platformLabelPause is how long the router stops writing platform labels
// after the API server refused one as Forbidden: its identity may not patch
// nodes, and asking again for every node at every status refresh would only
// repeat the refusal and its error line.
const platformLabelPause = time.Hour

// labelPlatform writes the platform label (node.cloudprovider.kubernetes.io/
// platform=<backend type>) on a node b serves that has none. Upstream's
// cloud-node controller drops InstanceMetadata.AdditionalLabels under
// kubernetes.io, so the router writes it itself, as Talos's CCM does, with
// a merge patch of that one label: a value already there (set by the
// kubelet's --node-labels, or by hand) is kept. A failure is logged and
// retried at the node's next metadata call; it never holds the node back.
// A Forbidden refusal (RBAC without patch on nodes) stops every write for
// platformLabelPause, logged once with the fix.
func (r *Nodes) labelPlatform(ctx context.Context, node *corev1.Node, b *backend.Member) {
	if r.Client == nil || b.Type == "" {
		return
	}
	if _, ok := node.Labels[providerid.PlatformLabel]; ok {
		return
	}
	if time.Now().UnixNano() < r.States.LabelRefusedUntil.Load() {
		return
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, providerid.PlatformLabel, b.Type)
	ctx, cancel := context.WithTimeout(ctx, platformLabelTimeout)
	defer cancel()
	_, err := r.Client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	logger := klog.FromContext(ctx).WithValues("node", klog.KObj(node), "backend", b.Name, "platform", b.Type)
	if apierrors.IsForbidden(err) {
		r.States.LabelRefusedUntil.Store(time.Now().Add(platformLabelPause).UnixNano())
		logger.Error(err, "The API server refused writing the node's platform label: grant this CCM's identity patch on nodes (the Helm chart's <release>-router ClusterRole under --use-service-account-credentials); no node gets the label until then, next try in "+platformLabelPause.String(), "label", providerid.PlatformLabel)
		return
	}
	if err != nil {
		logger.Error(err, "Cannot write the node's platform label; retrying at its next metadata call", "label", providerid.PlatformLabel)
		return
	}
	logger.V(2).Info("Labelled the node with its platform", "label", providerid.PlatformLabel)
}

// Targetable returns the nodes backend b's load balancer for the Service
// can send traffic to: the nodes of this CCM's platforms (OwnNodes) that
// b can target.
func (r *Nodes) Targetable(b *backend.Member, service *corev1.Service, nodes []*corev1.Node) []*corev1.Node {
	return b.Targetable(service, r.OwnNodes(nodes))
}

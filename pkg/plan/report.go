package plan

import (
	"fmt"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Report is a plan: what the CCM would do to each Node and LoadBalancer
// Service if it started now.
type Report struct {
	Nodes    []NodePlan    `json:"nodes"`
	Services []ServicePlan `json:"services"`
	Summary  Summary       `json:"summary"`
}

// Node outcomes.
const (
	// NodeClaimed: a backend owns the node and has its instance.
	NodeClaimed = "claimed"
	// NodeDeleted: the node's owner reports its instance gone and the
	// Node is not Ready; the node-lifecycle controller would delete it.
	NodeDeleted = "WOULD BE DELETED"
	// NodeGoneReady: the node's owner reports its instance gone but the
	// Node is Ready: the node-lifecycle controller asks the cloud only
	// about Nodes that are not Ready, so it keeps this one, and deletes it
	// the first time it is not Ready (a kubelet restart, a network
	// partition).
	NodeGoneReady = "GONE, DELETED WHEN NOT READY"
	// NodeUnmanaged: no backend owns its providerID scheme and the config
	// says to leave such nodes alone (nodes.unmanaged: ignore).
	NodeUnmanaged = "unmanaged"
	// NodeOtherCCM: the node's platform (its providerID scheme, or its
	// cloudprovider.kubernetes.io/platform annotation) is one this CCM
	// does not serve (KEP-5778; nodes.platforms, --cloud-provider-platforms):
	// another CCM's node, never initialised, deleted or targeted by us.
	NodeOtherCCM = "other CCM's"
	// NodeError: the router refuses the node (unmanaged, ambiguous,
	// outside every region, a backend that cannot answer): it is never
	// deleted, and a new node stays tainted.
	NodeError = "error"
)

// NodePlan is one Node's plan.
type NodePlan struct {
	Name       string `json:"name"`
	ProviderID string `json:"providerID,omitempty"`
	// Backend would own the node ("" for none).
	Backend string `json:"backend,omitempty"`
	// ChosenBy says why: "label" (multicloud-ccm.io/backend), "scheme"
	// (the providerID's), "rule" (a nodes.rules entry) or "claim" (the one
	// backend that has a matching instance).
	ChosenBy string `json:"chosenBy,omitempty"`
	// InstanceFound: the owner has the node's instance.
	InstanceFound bool `json:"instanceFound"`
	// Platform is, for a node another CCM owns (NodeOtherCCM), its
	// platform: the CCM of that platform is left the node.
	Platform string `json:"platform,omitempty"`
	// NewProviderID is the providerID the node would be given (it has
	// none yet).
	NewProviderID string `json:"newProviderID,omitempty"`
	// Shutdown: the owner reports the instance shut down (the node would
	// be tainted node.cloudprovider.kubernetes.io/shutdown).
	Shutdown bool   `json:"shutdown,omitempty"`
	Outcome  string `json:"outcome"`
	Error    string `json:"error,omitempty"`
}

// Load-balancer outcomes.
const (
	// LBAdopted: the Service's existing load balancer is kept and served
	// in place (the upstream CCM's NLB, OCCM's Octavia load balancer, the
	// address in its status), possibly with changes.
	LBAdopted = "adopted"
	// LBCreated: a new load balancer would be made.
	LBCreated = "created"
	// LBReplaced: the Service's load balancer (or address) would be made
	// again: a new address or DNS name.
	LBReplaced = "REPLACED"
	// LBElsewhere: no backend of ours serves the Service (another
	// controller's class, or no annotation and no default).
	LBElsewhere = "not ours"
	// LBRefused: the router or the backend refuses the Service as it is
	// (a malformed annotation, an unknown backend, a conflict).
	LBRefused = "REFUSED"
)

// ServicePlan is one LoadBalancer Service's plan.
type ServicePlan struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Backend would serve it ("" for none).
	Backend string `json:"backend,omitempty"`
	// ChosenBy says why: "class <name>", "annotation", "default", or ""
	// when nothing routes it to us.
	ChosenBy string `json:"chosenBy,omitempty"`
	Outcome  string `json:"outcome"`
	// Address is what the Service's status shows now; NewAddress what the
	// backend would answer ("" while a new load balancer has none yet).
	Address    string `json:"address,omitempty"`
	NewAddress string `json:"newAddress,omitempty"`
	// Adoption says what adopting the load balancer takes (OCCM's is
	// tagged as this Service's); Changes are the mutating calls the
	// backends would make, the adoption's excepted, in order.
	Adoption    []backends.Intent `json:"adoption,omitempty"`
	Changes     []backends.Intent `json:"changes,omitempty"`
	Annotations []AnnotationIssue `json:"annotations,omitempty"`
	// DeletedFrom names the backends whose load balancer for the Service
	// is deleted at once (the Service moving out of them); DrainedFrom
	// those whose load balancer is drained, then deleted.
	DeletedFrom []string `json:"deletedFrom,omitempty"`
	DrainedFrom []string `json:"drainedFrom,omitempty"`
	// HandedOver names the backends the Service names that leave it to
	// another controller (the aws backend for
	// service.beta.kubernetes.io/aws-load-balancer-type: external): they
	// do not serve it (not in Backend); a load balancer they hold is
	// kept, for that controller, not deleted, and its addresses leave
	// the status.
	HandedOver []string `json:"handedOver,omitempty"`
	// Forgotten names the backends the Service leaves that hold nothing
	// for it, as they answer (the aws backend for an `external` Service:
	// its NLB is the other controller's): dropped from the record,
	// nothing deleted; their addresses leave the status.
	Forgotten []string `json:"forgotten,omitempty"`
	// RefusedBy names, for a REFUSED Service, the backends that refuse it
	// (Error says why); the others in Backend serve it all the same:
	// Changes are theirs too, and NewAddress what the status shows (the
	// refusing backends' addresses taken out; Address when the sync
	// shows nothing, the status kept as it is).
	RefusedBy []string `json:"refusedBy,omitempty"`
	// Targets are, by backend whose load balancer sends traffic to nodes
	// (bare metal's announces an address and targets none), the names of
	// the nodes it targets once the switch settled: the nodes as the plan
	// leaves them (those WOULD BE DELETED gone, those claimed initialised
	// with their providerID and addresses) that the router hands the
	// backend in its node syncs, draining load balancers included. Changes
	// list the first sync's calls, with the nodes as they are now; the
	// node syncs after the nodes changed make the rest, and end here. A
	// refused Service's load balancer kept outside its targets whose
	// update fails too (Error's "kept meanwhile") keeps the targets it
	// has: it is not listed.
	Targets map[string][]string `json:"targets,omitempty"`
	Error   string              `json:"error,omitempty"`
}

// AnnotationIssue is an annotation of a Service that would not do what its
// author expects.
type AnnotationIssue struct {
	Annotation string `json:"annotation"`
	Value      string `json:"value"`
	// Problem is "unknown", "malformed" or "not honoured".
	Problem string `json:"problem"`
	Detail  string `json:"detail"`
}

// Annotation problems.
const (
	AnnotationUnknown     = "unknown"
	AnnotationMalformed   = "malformed"
	AnnotationNotHonoured = "not honoured"
)

// Summary counts the plan's outcomes.
type Summary struct {
	NodesClaimed   int `json:"nodesClaimed"`
	NodesDeleted   int `json:"nodesWouldBeDeleted"`
	NodesGoneReady int `json:"nodesGoneButReady"`
	NodesUnmanaged int `json:"nodesUnmanaged"`
	// NodesOtherCCMs counts the nodes left to other CCMs (NodeOtherCCM).
	NodesOtherCCMs int `json:"nodesOtherCCMs"`
	NodeErrors     int `json:"nodeErrors"`
	LBAdopted      int `json:"loadBalancersAdopted"`
	LBCreated      int `json:"loadBalancersCreated"`
	LBReplaced     int `json:"loadBalancersReplaced"`
	LBRefused      int `json:"loadBalancersRefused"`
	// LBDeleted counts the load balancers the plan deletes (a Service
	// moving out of a backend, at once or after its drain period).
	LBDeleted        int `json:"loadBalancersDeleted"`
	LBElsewhere      int `json:"loadBalancersNotOurs"`
	LBChanges        int `json:"loadBalancerChanges"`
	AnnotationIssues int `json:"annotationsNotHonoured"`
}

func summarize(r *Report) Summary {
	var s Summary
	for _, n := range r.Nodes {
		switch n.Outcome {
		case NodeClaimed:
			s.NodesClaimed++
		case NodeDeleted:
			s.NodesDeleted++
		case NodeGoneReady:
			s.NodesGoneReady++
		case NodeUnmanaged:
			s.NodesUnmanaged++
		case NodeOtherCCM:
			s.NodesOtherCCMs++
		default:
			s.NodeErrors++
		}
	}
	for _, sp := range r.Services {
		switch sp.Outcome {
		case LBAdopted:
			s.LBAdopted++
		case LBCreated:
			s.LBCreated++
		case LBReplaced:
			s.LBReplaced++
		case LBRefused:
			s.LBRefused++
		default:
			s.LBElsewhere++
		}
		s.LBChanges += len(sp.Changes)
		s.LBDeleted += len(sp.DeletedFrom) + len(sp.DrainedFrom)
		s.AnnotationIssues += len(sp.Annotations)
	}
	return s
}

// String is the line an operator acts on.
func (s Summary) String() string {
	out := fmt.Sprintf("%d nodes claimed, %d would be deleted", s.NodesClaimed, s.NodesDeleted)
	if s.NodesGoneReady > 0 {
		out += fmt.Sprintf(", %d deleted when not Ready", s.NodesGoneReady)
	}
	if s.NodeErrors > 0 {
		out += fmt.Sprintf(", %d refused", s.NodeErrors)
	}
	if s.NodesUnmanaged > 0 {
		out += fmt.Sprintf(", %d unmanaged", s.NodesUnmanaged)
	}
	if s.NodesOtherCCMs > 0 {
		out += fmt.Sprintf(", %d left to other CCMs", s.NodesOtherCCMs)
	}
	out += fmt.Sprintf("; %d load balancers adopted, %d created, %d replaced", s.LBAdopted, s.LBCreated, s.LBReplaced)
	if s.LBDeleted > 0 {
		out += fmt.Sprintf(", %d deleted", s.LBDeleted)
	}
	if s.LBRefused > 0 {
		out += fmt.Sprintf(", %d refused", s.LBRefused)
	}
	return out + fmt.Sprintf("; %d changes; %d annotations not honoured", s.LBChanges, s.AnnotationIssues)
}

// Failed reports whether the plan would delete, replace or refuse
// something (a Node deleted now or the first time it is not Ready, a load
// balancer deleted or replaced): the command then exits 1.
func (s Summary) Failed() bool {
	return s.NodesDeleted > 0 || s.NodesGoneReady > 0 || s.NodeErrors > 0 || s.LBReplaced > 0 || s.LBDeleted > 0 || s.LBRefused > 0
}

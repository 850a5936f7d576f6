// Package backends is the contract between the router and the clouds behind
// it. A backend is a cloudprovider.Interface built from its config section:
// the router uses its InstancesV2, LoadBalancer and Routes, forwards
// Initialize and (for backends implementing cloudprovider.InformerUser)
// SetInformers, and never calls Instances, Zones or Clusters. Each backend
// package registers its type once, with Register from init: its type, its
// providerID scheme, its config-section parser and its constructor. The
// binary chooses the compiled-in types by importing their packages
// (cmd/multicloud-ccm/backends.go); docs/adding-a-backend.md walks through
// a new one.
//
// The contract a backend keeps, beyond cloudprovider's own:
//
//   - InstanceExists returns (false, nil) only when the backend positively
//     knows the instance is gone. Any doubt (an API error, a timeout, an
//     unreachable endpoint) is an error. A false deletes the Node.
//   - For a node with no providerID, InstanceExists answers whether the
//     backend has an instance matching the node (by name, address or what
//     else the cloud offers): true claims the node. InstanceMetadata for such
//     a node returns the ProviderID it found.
//   - InstanceMetadata never returns (nil, nil).
//   - Errors a user can fix (a VM without guest tools, a bad annotation) are
//     wrapped with NewUserError so the router can put a Warning event on the
//     object.
//   - A LoadBalancer's GetLoadBalancer reports exists=true while any part of
//     the load balancer is left in the cloud; EnsureLoadBalancerDeleted is
//     idempotent and removes every part.
//   - With nothing changed, EnsureLoadBalancer and UpdateLoadBalancer make no
//     mutating cloud call.
//   - A providerID of the backend's scheme naming a region, zone, vCenter,
//     datacenter or site the backend does not serve is an error, never
//     gone; one that does not parse is a UserError with reason
//     InvalidProviderID.
//   - InstanceShutdown answers true only on fresh evidence, never from a
//     snapshot older than the instance's last power change.
//   - A crash between any two steps of a create leaves exactly one load
//     balancer after the next EnsureLoadBalancer.
//   - UpdateLoadBalancer never creates a load balancer: upstream's node sync
//     calls it for Services whose delete may have just finished.
//   - The type classes its SDK's errors (Registration.ClassifyError):
//     throttled, auth, not_found, unavailable, user. The router imports no
//     SDK; it counts failed calls by class (ClassifyError) and takes a
//     refusal of the credentials for no answer. An error the backend
//     returns keeps the SDK's error in its chain (%w), or carries the
//     class another way (vSphere's SOAP status, see its ClassifyError).
//
// The contract is executable: internal/backendtest runs it against a
// backend through hooks on its test cloud, and every backend passes it from
// its conformance_test.go. A new backend's author starts there.
package backends

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// Options is what a backend constructor receives.
type Options struct {
	// Name is the backend's unique name from the config.
	Name string
	// ClusterID names and tags what the backend creates.
	ClusterID string
	// Settings is the value the type's config.SectionParser returned.
	Settings any
}

// Factory builds a backend. It must not block on the cloud for long: a
// cloud that is unreachable at start-up makes calls fail later, it does not
// stop the CCM from starting.
type Factory func(ctx context.Context, o Options) (cloudprovider.Interface, error)

// Registration describes a backend type: everything the config parser, the
// router and the binary need to know of it.
type Registration struct {
	// Type is the value of a backend's type field (aws, openstack, ...), and
	// the key of its settings section in the config file.
	Type string
	// Scheme is the providerID scheme the type's nodes carry ("aws" for
	// aws:///zone/i-123), or "" when the type owns no nodes.
	Scheme string
	// Parse decodes and validates the type's config section (usually with
	// config.DecodeSection); what it returns is Options.Settings. Required.
	Parse config.SectionParser
	// CrossValidate, if set, checks the type's sections together, for
	// rules no section can check alone (see config.CrossValidator).
	CrossValidate config.CrossValidator
	// New builds a backend of this type. Required.
	New Factory
	// ClassifyError classes the errors of the type's SDK (throttled,
	// auth, not_found, unavailable, user; ClassOther for an error it does
	// not know), for the router's errors metric and health. Every backend
	// of this repository sets it, and the conformance suite checks it
	// against the errors its backend returns; a type without it has its
	// errors classed only by ClassifyError's generic rules.
	ClassifyError ErrorClassifier
}

var (
	mu            sync.RWMutex
	registrations = map[string]Registration{}
	// classifierList holds the registrations' classifiers, by type.
	classifierList []ErrorClassifier
)

// Register makes a backend type available to the config parser and the
// router; a backend package calls it once, from init. Registering a type
// twice, or without Type, Parse or New, panics.
func Register(r Registration) {
	if r.Type == "" || r.Parse == nil || r.New == nil {
		panic(fmt.Sprintf("backends: registration of type %q needs Type, Parse and New", r.Type))
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registrations[r.Type]; dup {
		panic(fmt.Sprintf("backends: type %q registered twice", r.Type))
	}
	config.RegisterSection(r.Type, r.Parse)
	if r.CrossValidate != nil {
		config.RegisterCrossValidator(r.Type, r.CrossValidate)
	}
	registrations[r.Type] = r
	classifierList = classifierList[:0:0]
	for _, t := range sortedTypes() {
		if c := registrations[t].ClassifyError; c != nil {
			classifierList = append(classifierList, c)
		}
	}
}

// Lookup returns the registration of a backend type.
func Lookup(typ string) (Registration, bool) {
	mu.RLock()
	defer mu.RUnlock()
	r, ok := registrations[typ]
	return r, ok
}

// Types lists the registered backend types, sorted.
func Types() []string {
	mu.RLock()
	defer mu.RUnlock()
	return sortedTypes()
}

// sortedTypes lists the registered types, sorted; mu is held.
func sortedTypes() []string {
	out := make([]string, 0, len(registrations))
	for t := range registrations {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// NodeTargeter is implemented by a backend's LoadBalancer when it chooses
// which nodes it can send traffic to. The router hands EnsureLoadBalancer and
// UpdateLoadBalancer only the nodes for which CanTarget is true. A load
// balancer that does not implement it receives only the backend's own nodes
// (those whose providerID has the backend's scheme and whose
// multicloud-ccm.io/backend label, if any, names the backend).
type NodeTargeter interface {
	CanTarget(service *corev1.Service, node *corev1.Node) bool
}

// AddressTargeter is implemented by a load balancer that says which nodes
// it reaches by their addresses. TargetsByAddress reports, for a node the
// load balancer can target for service, whether it reaches that node by
// the node's addresses (AWS IP targets, Octavia members): a change of its
// InternalIP or ExternalIP addresses then changes the load balancer, and
// its providerID is taken not to. False means the node is reached by its
// identity (AWS instance targets, registered by instance ID): its
// addresses do not matter, its providerID does.
//
// The router uses it twice. When a node's addresses change, it re-targets
// a Service only in backends that reach the node by address; and after an
// EnsureLoadBalancer or UpdateLoadBalancer it compares, per node it was
// handed, the addresses of a node reached by address and the providerID of
// one that is not, with the node lister's. A load balancer that does not
// implement it is taken to reach every node by address (it is re-targeted
// on any address change of a node it can target), unless it is
// NodeIndependent.
type AddressTargeter interface {
	TargetsByAddress(service *corev1.Service, node *corev1.Node) bool
}

// NodeIndependent is implemented by a load balancer whose traffic never goes
// to the nodes it is handed (bare metal: the speaker announcing an address
// picks its nodes). The router then neither re-targets it when a node's
// addresses change nor re-syncs it when it was handed a stale node list: at
// thousands of nodes those re-syncs are O(node changes × Services) for
// nothing. A load balancer that does not implement it is taken to target
// the nodes it is handed.
type NodeIndependent interface {
	IgnoresNodes() bool
}

// StatusAnnounced is implemented by a load balancer that is announced from
// the Service's status: its load balancer is only its addresses, and what
// makes them answer is a speaker outside the CCM reading
// status.loadBalancer.ingress (bare metal behind MetalLB's speaker; kube-vip
// reads its own annotation). Taking such an address out of the status
// stops it answering, and whatever allocates those addresses after a
// restart learns which are taken from the statuses. So when the router
// drains such a load balancer (a move off its backend with a drain period),
// it keeps its addresses in the status until the drain ends and withdraws
// them from DNS instead (external-dns's target annotation, see
// docs/routing.md); a load balancer that does not implement it (a cloud
// load balancer with addresses of its own) has its addresses taken out of
// the status when its drain starts.
type StatusAnnounced interface {
	AnnouncedFromStatus() bool
}

// UserError is an error the user can fix. The router records it as a
// Warning event with Reason on the Node or Service concerned.
type UserError struct {
	// Reason is a stable CamelCase event reason.
	Reason string
	Err    error
}

// NewUserError wraps err as a user-fixable error with an event reason.
func NewUserError(reason string, err error) error {
	return &UserError{Reason: reason, Err: err}
}

func (e *UserError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *UserError) Unwrap() error { return e.Err }

// AsUserError returns the UserError in err's chain, if any.
func AsUserError(err error) (*UserError, bool) {
	var ue *UserError
	ok := errors.As(err, &ue)
	return ue, ok
}

// InstancesV2Only is embedded in every backend's cloud: it answers the parts
// of cloudprovider.Interface the router never calls with "not offered" (the
// legacy Instances, whose providerIDs and InstanceNotFound handling delete
// nodes; Zones, which InstanceMetadata carries; Clusters), and HasClusterID
// with true, since every backend gets the cluster ID from the config.
type InstancesV2Only struct{}

// Instances is not offered: the router uses InstancesV2 only.
func (InstancesV2Only) Instances() (cloudprovider.Instances, bool) { return nil, false }

// Zones is not offered: InstanceMetadata carries zones and regions.
func (InstancesV2Only) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not offered.
func (InstancesV2Only) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// HasClusterID is true: every backend is configured with the cluster ID.
func (InstancesV2Only) HasClusterID() bool { return true }

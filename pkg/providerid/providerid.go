// Package providerid splits a Node's spec.providerID into its scheme and the
// rest (in package scheme), and names a node's platform (KEP-5778). Each
// backend parses the rest in its own format.
package providerid

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid/scheme"
)

// Scheme returns the scheme of a providerID ("aws" for "aws:///us-east-1a/i-1").
// A providerID without "://" or with an empty or non-alphanumeric scheme is
// an error that says what a providerID looks like (scheme.Of).
func Scheme(providerID string) (string, error) {
	return scheme.Of(providerID)
}

// KEP-5778 ("Introduce explicit node ownership to allow multiple CCMs in a
// single Kubernetes cluster", kubernetes/enhancements#5779) names a node's
// platform by its providerID scheme; these are the names it and the CCMs
// that already follow it use. Never change them.
const (
	// PlatformAnnotation (Node annotation, string, default: none) names the
	// platform of a node that has no providerID yet, so the CCM of another
	// platform leaves it alone (KEP-5778). The tool that registers the node
	// (or an operator, with kubectl annotate) sets it.
	PlatformAnnotation = "cloudprovider.kubernetes.io/platform"
	// PlatformLabel (Node label, string) is the platform of an initialised
	// node, as Talos's and Proxmox's CCMs write it: per-cloud CSI drivers
	// and DaemonSets select their nodes on it. multicloud-ccm writes its
	// backend's type (aws, openstack, vsphere, baremetal).
	PlatformLabel = "node.cloudprovider.kubernetes.io/platform"
)

// NodePlatform returns the platform a node names, without any CCM's
// configuration: its providerID scheme, else its PlatformAnnotation, else
// "" (a node that says nothing, or whose providerID does not parse).
func NodePlatform(node *corev1.Node) string {
	if node.Spec.ProviderID != "" {
		scheme, _ := Scheme(node.Spec.ProviderID)
		return scheme
	}
	return node.Annotations[PlatformAnnotation]
}

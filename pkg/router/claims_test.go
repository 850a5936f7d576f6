package router

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	upstreamfake "k8s.io/cloud-provider/fake"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/dispatch"
)

// byAddress is a vSphere-like backend that claims any node with a given
// InternalIP (a VM's guest IP), as a weak address match would.
type byAddress struct {
	*upstreamfake.Cloud
	ip string
}

func (c *byAddress) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

func (c *byAddress) InstanceExists(_ context.Context, n *corev1.Node) (bool, error) {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address == c.ip {
			return true, nil
		}
	}
	return false, nil
}

func (c *byAddress) InstanceMetadata(context.Context, *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	return &cloudprovider.InstanceMetadata{ProviderID: "vsphere://4237c7d5-3b7e-4c26-9a0e-8f3c1a2b3c4d"}, nil
}

// TestGuestIPAndInventoryEntryClaimingOneNode settles a node with no
// providerID that vSphere claims by a guest IP alone while a bare-metal
// inventory entry (real backend) lists the same name and address. Neither
// wins: the router cannot weigh claims it only sees as yes or no, and the
// first providerID written is final (upstream never changes it), so a wrong
// pick would route the node to the wrong cloud for good. The node stays
// uninitialised with an AmbiguousNodeOwner error naming both, until the
// operator's label or nodes.rules entry names its backend, which then wins
// without asking anyone else.
func TestGuestIPAndInventoryEntryClaimingOneNode(t *testing.T) {
	vs := &byAddress{Cloud: &upstreamfake.Cloud{DisableLoadBalancers: true, DisableRoutes: true}, ip: "10.0.0.15"}
	r := metalRouter(t, "error", Backend{Name: "vs", Type: "vsphere", Scheme: "vsphere", Cloud: vs})
	node := newNode("both-1", uninitialized, withInternalIP("10.0.0.15"))

	_, err := r.InstanceMetadata(context.Background(), node)
	checkErr(t, err, "backends [metal vs] all claim it")
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != dispatch.ReasonAmbiguousNode {
		t.Errorf("error %v has no reason %s", err, dispatch.ReasonAmbiguousNode)
	}
	if ok, err := r.InstanceExists(context.Background(), node); err == nil || ok {
		t.Errorf("InstanceExists = %v, %v; want an error", ok, err)
	}

	labelled := newNode("both-1", uninitialized, withInternalIP("10.0.0.15"), withNodeBackend("metal"))
	md, err := r.InstanceMetadata(context.Background(), labelled)
	if err != nil || md.ProviderID != "baremetal://both-1" {
		t.Fatalf("with the label: metadata %+v, %v; want baremetal://both-1", md, err)
	}
}

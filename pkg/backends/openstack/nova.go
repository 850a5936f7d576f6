package openstack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/pagination"
	corev1 "k8s.io/api/core/v1"
)

// Nova server statuses the backend acts on.
const (
	statusShutoff = "SHUTOFF"
	statusDeleted = "DELETED"
	statusUnknown = "UNKNOWN"
)

// server is what the backend keeps of a Nova server.
type server struct {
	ID        string
	Name      string
	Status    string
	Zone      string
	Flavor    string
	Addresses []corev1.NodeAddress
}

// nova lists and gets servers.
type nova struct {
	clients  func(ctx context.Context) (*serviceClients, error)
	pageSize int
	networks addressRules
}

var _ serverSource = (*nova)(nil)

// computeClient returns Nova's client, or why there is none.
func (n *nova) computeClient(ctx context.Context) (*gophercloud.ServiceClient, error) {
	sc, err := n.clients(ctx)
	if err != nil {
		return nil, err
	}
	if sc.compute == nil {
		return nil, sc.computeErr
	}
	return sc.compute, nil
}

func (n *nova) listServers(ctx context.Context) ([]*server, error) {
	compute, err := n.computeClient(ctx)
	if err != nil {
		return nil, err
	}
	var out []*server
	err = servers.List(compute, servers.ListOpts{Limit: n.pageSize}).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		list, err := servers.ExtractServers(p)
		if err != nil {
			return false, err
		}
		for i := range list {
			out = append(out, n.convert(&list[i]))
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing servers: %w", err)
	}
	return out, nil
}

func (n *nova) getServer(ctx context.Context, id string) (*server, error) {
	compute, err := n.computeClient(ctx)
	if err != nil {
		return nil, err
	}
	s, err := servers.Get(ctx, compute, id).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil, fmt.Errorf("server %s: %w", id, errServerNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("getting server %s: %w", id, err)
	}
	return n.convert(s), nil
}

func (n *nova) convert(s *servers.Server) *server {
	return &server{
		ID: s.ID, Name: s.Name, Status: s.Status, Zone: s.AvailabilityZone,
		Flavor:    flavorName(s.Flavor),
		Addresses: n.networks.nodeAddresses(s),
	}
}

// flavorName reads flavor.original_name (microversion 2.47 and later), else
// the flavor's ID.
func flavorName(f map[string]any) string {
	if name, ok := f["original_name"].(string); ok && name != "" {
		return name
	}
	if id, ok := f["id"].(string); ok {
		return id
	}
	return ""
}

// addressRules say which networks are internal and which public.
type addressRules struct {
	internal []string
	public   []string
}

// nodeAddresses maps a server's addresses to node addresses: fixed
// addresses are InternalIP (ExternalIP on a public network; skipped on a
// network outside internal when internal is set), floating addresses and
// accessIPv4/v6 are ExternalIP. Internal addresses come first; networks are
// read in name order.
func (r addressRules) nodeAddresses(s *servers.Server) []corev1.NodeAddress {
	var internal, external []corev1.NodeAddress
	nets := make([]string, 0, len(s.Addresses))
	for name := range s.Addresses {
		nets = append(nets, name)
	}
	sort.Strings(nets)
	for _, network := range nets {
		for _, a := range addressList(s.Addresses[network]) {
			switch {
			case a.kind == "floating" || slices.Contains(r.public, network):
				external = append(external, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: a.addr})
			case len(r.internal) == 0 || slices.Contains(r.internal, network):
				internal = append(internal, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.addr})
			}
		}
	}
	for _, ip := range []string{s.AccessIPv4, s.AccessIPv6} {
		if ip != "" {
			external = append(external, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip})
		}
	}
	return dedupe(append(internal, external...))
}

type novaAddress struct{ addr, kind string }

// addressList reads one network's entry of server.addresses.
func addressList(v any) []novaAddress {
	list, _ := v.([]any)
	var out []novaAddress
	for _, item := range list {
		m, _ := item.(map[string]any)
		addr, _ := m["addr"].(string)
		kind, _ := m["OS-EXT-IPS:type"].(string)
		if net.ParseIP(addr) == nil {
			continue
		}
		if kind == "" {
			kind = "fixed"
		}
		out = append(out, novaAddress{addr: addr, kind: kind})
	}
	return out
}

func dedupe(in []corev1.NodeAddress) []corev1.NodeAddress {
	seen := map[corev1.NodeAddress]bool{}
	out := make([]corev1.NodeAddress, 0, len(in))
	for _, a := range in {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

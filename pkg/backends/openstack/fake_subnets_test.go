package openstack

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// FakeSubnet is a Neutron subnet of the fake; its floating IPs are
// Prefix + a number. A Full one has no free address left.
type FakeSubnet struct {
	ID, Name, NetworkID, Prefix string
	Tags                        []string
	Full                        bool
	// IPVersion is 4 (the default, 0) or 6.
	IPVersion int
}

// AddSubnet adds a subnet (listed after those added before).
func (f *FakeOpenStack) AddSubnet(s FakeSubnet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subnets = append(f.subnets, &s)
}

// listSubnets is GET /v2.0/subnets filtered as Neutron does by id,
// network_id, name, ip_version and the tag filters tags (all), tags-any,
// not-tags (none) and not-tags-any (not all).
func (f *FakeOpenStack) listSubnets(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := r.URL.Query()
	out := []map[string]any{}
	for _, s := range f.subnets {
		version := max(s.IPVersion, 4)
		if (q.Has("id") && q.Get("id") != s.ID) || (q.Has("network_id") && q.Get("network_id") != s.NetworkID) ||
			(q.Has("name") && q.Get("name") != s.Name) || (q.Has("ip_version") && q.Get("ip_version") != fmt.Sprint(version)) || !tagFilters(q.Get, s.Tags) {
			continue
		}
		out = append(out, map[string]any{
			"id": s.ID, "name": s.Name, "network_id": s.NetworkID, "cidr": s.Prefix + "0/24", "ip_version": version, "tags": s.Tags,
			"enable_dhcp": false, "gateway_ip": s.Prefix + "1", "tenant_id": "p-1", "project_id": "p-1",
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"subnets": out})
}

// tagFilters applies Neutron's four tag filters to a resource's tags.
func tagFilters(get func(string) string, have []string) bool {
	count := func(list string) (n, of int) {
		for _, t := range strings.Split(list, ",") {
			of++
			if slices.Contains(have, t) {
				n++
			}
		}
		return n, of
	}
	if v := get("tags"); v != "" {
		if n, of := count(v); n != of {
			return false
		}
	}
	if v := get("tags-any"); v != "" {
		if n, _ := count(v); n == 0 {
			return false
		}
	}
	if v := get("not-tags"); v != "" {
		if n, of := count(v); n == of {
			return false
		}
	}
	if v := get("not-tags-any"); v != "" {
		if n, _ := count(v); n > 0 {
			return false
		}
	}
	return true
}

// subnetPrefix checks a floating IP's subnet as Neutron does (known, on
// the floating network, not full) and returns its address prefix, or
// answers the error and returns "". f.mu is held.
func (f *FakeOpenStack) subnetPrefix(w http.ResponseWriter, networkID, subnetID string) string {
	i := slices.IndexFunc(f.subnets, func(s *FakeSubnet) bool { return s.ID == subnetID })
	switch {
	case i < 0:
		writeJSON(w, http.StatusNotFound, map[string]any{"NeutronError": map[string]any{"type": "SubnetNotFound", "message": "Subnet " + subnetID + " could not be found."}})
	case f.subnets[i].NetworkID != networkID:
		writeJSON(w, http.StatusBadRequest, map[string]any{"NeutronError": map[string]any{"type": "BadRequest", "message": "Bad floatingip request: Subnet with id " + subnetID + " is not on external network " + networkID + "."}})
	case f.subnets[i].Full:
		writeJSON(w, http.StatusConflict, map[string]any{"NeutronError": map[string]any{"type": "IpAddressGenerationFailure", "message": "No more IP addresses available on network " + networkID + "."}})
	default:
		return f.subnets[i].Prefix
	}
	return ""
}

// AddFloatingIPOn adds a floating IP associated with a port, with the
// given description (as another controller allocated it).
func (f *FakeOpenStack) AddFloatingIPOn(addr, network, portID, description string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	id := fmt.Sprintf("f1000000-0000-4000-8000-%012d", f.nextID)
	f.fips[id] = &FakeFloatingIP{ID: id, FloatingIP: addr, NetworkID: network, PortID: portID, Description: description}
}

package vsphere

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Event reasons of user-fixable vSphere problems.
const (
	// ReasonTagCategoryNotFound: zoneCategory or regionCategory names a tag
	// category the vCenter does not have.
	ReasonTagCategoryNotFound = "VSphereTagCategoryNotFound"
	// ReasonTopologyAmbiguous: one object carries two tags of the zone (or
	// region) category.
	ReasonTopologyAmbiguous = "VSphereTopologyAmbiguous"
)

// topology is a VM's zone and region, or why they are unknown.
type topology struct {
	Zone, Region string
	Err          error
}

// categories are the tag category IDs of zones and regions ("" when not
// configured).
type categories struct {
	zone, region string
}

// tagReader reads zones and regions of VMs from tags on their host, cluster
// and datacenter. It remembers tags it has seen (a tag's category never
// changes), so a refresh costs one list-attached-tags call plus one call per
// tag never seen before.
type tagReader struct {
	zoneCategory, regionCategory string
	// path names the backend's section in error messages.
	path string

	mu   sync.Mutex
	seen map[string]tags.Tag
}

func (r *tagReader) enabled() bool { return r.zoneCategory != "" || r.regionCategory != "" }

// resolveCategories finds the configured categories by name. It costs one
// call per category in the vCenter and runs once per session.
func (r *tagReader) resolveCategories(ctx context.Context, m *tags.Manager, vcenter string) (categories, error) {
	all, err := m.GetCategories(ctx)
	if err != nil {
		return categories{}, fmt.Errorf("listing tag categories: %w", err)
	}
	byName := map[string]string{}
	for _, c := range all {
		byName[c.Name] = c.ID
	}
	var cats categories
	var missing []error
	for _, want := range []struct {
		name, field string
		id          *string
	}{{r.zoneCategory, "zoneCategory", &cats.zone}, {r.regionCategory, "regionCategory", &cats.region}} {
		if want.name == "" {
			continue
		}
		id, ok := byName[want.name]
		if !ok {
			missing = append(missing, fmt.Errorf("%s.%s: tag category %q does not exist in vCenter %s; create it or fix the name", r.path, want.field, want.name, vcenter))
		}
		*want.id = id
	}
	if len(missing) > 0 {
		return categories{}, backends.NewUserError(ReasonTagCategoryNotFound, joinErrors(missing))
	}
	return cats, nil
}

// read returns the zone and region of every VM in inv, keyed by VM.
func (r *tagReader) read(ctx context.Context, rc *rest.Client, cats categories, vms []*vmInfo) (map[types.ManagedObjectReference]topology, error) {
	m := tags.NewManager(rc)
	attached, err := r.attached(ctx, m, vms)
	if err != nil {
		return nil, err
	}
	if err := r.learn(ctx, m, attached); err != nil {
		return nil, err
	}
	out := make(map[types.ManagedObjectReference]topology, len(vms))
	for _, vm := range vms {
		out[vm.Ref] = r.topologyOf(vm, cats, attached)
	}
	return out, nil
}

// attached lists the tag IDs on every host, cluster and datacenter holding
// one of vms, in one call.
func (r *tagReader) attached(ctx context.Context, m *tags.Manager, vms []*vmInfo) (map[types.ManagedObjectReference][]string, error) {
	set := map[types.ManagedObjectReference]bool{}
	for _, vm := range vms {
		for _, ref := range ancestry(vm) {
			set[ref] = true
		}
	}
	out := map[types.ManagedObjectReference][]string{}
	if len(set) == 0 {
		return out, nil
	}
	objs := make([]mo.Reference, 0, len(set))
	for ref := range set {
		objs = append(objs, ref)
	}
	res, err := m.ListAttachedTagsOnObjects(ctx, objs)
	if err != nil {
		return nil, fmt.Errorf("listing tags on hosts, clusters and datacenters: %w", err)
	}
	for _, a := range res {
		ref := types.ManagedObjectReference{Type: a.ObjectID.Reference().Type, Value: a.ObjectID.Reference().Value}
		out[ref] = a.TagIDs
	}
	return out, nil
}

// learn fetches the tags not seen before.
func (r *tagReader) learn(ctx context.Context, m *tags.Manager, attached map[types.ManagedObjectReference][]string) error {
	for _, ids := range attached {
		for _, id := range ids {
			if _, ok := r.tag(id); ok {
				continue
			}
			t, err := m.GetTag(ctx, id)
			if err != nil {
				return fmt.Errorf("reading tag %s: %w", id, err)
			}
			r.mu.Lock()
			if r.seen == nil {
				r.seen = map[string]tags.Tag{}
			}
			r.seen[id] = *t
			r.mu.Unlock()
		}
	}
	return nil
}

func (r *tagReader) tag(id string) (tags.Tag, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.seen[id]
	return t, ok
}

// ancestry is a VM's host, cluster and datacenter, nearest first.
func ancestry(vm *vmInfo) []types.ManagedObjectReference {
	var out []types.ManagedObjectReference
	if vm.Host != nil {
		out = append(out, *vm.Host)
	}
	if vm.Cluster != nil {
		out = append(out, *vm.Cluster)
	}
	return append(out, vm.DatacenterRef)
}

// topologyOf finds, for zone and region separately, the nearest object in
// the VM's ancestry carrying a tag of the category.
func (r *tagReader) topologyOf(vm *vmInfo, cats categories, attached map[types.ManagedObjectReference][]string) topology {
	var t topology
	var errs []error
	var err error
	if cats.zone != "" {
		t.Zone, err = r.nearest(vm, cats.zone, "zone", attached)
		errs = appendErr(errs, err)
	}
	if cats.region != "" {
		t.Region, err = r.nearest(vm, cats.region, "region", attached)
		errs = appendErr(errs, err)
	}
	if len(errs) > 0 {
		t.Err = backends.NewUserError(ReasonTopologyAmbiguous, joinErrors(errs))
	}
	return t
}

func (r *tagReader) nearest(vm *vmInfo, categoryID, what string, attached map[types.ManagedObjectReference][]string) (string, error) {
	for _, ref := range ancestry(vm) {
		var names []string
		for _, id := range attached[ref] {
			if t, ok := r.tag(id); ok && t.CategoryID == categoryID {
				names = append(names, t.Name)
			}
		}
		sort.Strings(names)
		switch len(names) {
		case 0:
			continue
		case 1:
			return names[0], nil
		default:
			return "", fmt.Errorf("%s %s of VM %s carries %d %s tags (%s); leave one", strings.ToLower(ref.Type), ref.Value, vm.Name, len(names), what, strings.Join(names, ", "))
		}
	}
	return "", nil
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

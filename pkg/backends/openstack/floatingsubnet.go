package openstack

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
)

// floatingSubnetSpec says which subnet of the floating network a floating
// IP comes from, with cloud-provider-openstack's rules: by ID, else by a
// name pattern and tags (every subnet matching both is tried in turn until
// one has a free address); with none set, Neutron chooses. source names
// where the spec comes from, for messages.
type floatingSubnetSpec struct {
	id, name, tags string
	source         string
}

// isSet reports whether the spec picks a subnet.
func (s floatingSubnetSpec) isSet() bool { return s.id != "" || s.name != "" || s.tags != "" }

// matches reports whether the spec picks subnets by name or tags.
func (s floatingSubnetSpec) matches() bool { return s.id == "" && (s.name != "" || s.tags != "") }

func (s floatingSubnetSpec) String() string {
	var parts []string
	for _, f := range [][2]string{{"name", s.name}, {"tags", s.tags}} {
		if f[1] != "" {
			parts = append(parts, fmt.Sprintf("%s %q", f[0], f[1]))
		}
	}
	return strings.Join(parts, " and ") + " (" + s.source + ")"
}

// nameMatcher compiles a floating-subnet pattern: a name or a glob (`*`,
// `?`), or after "~" a regular expression; the whole name must match. A
// leading "!" negates it.
func nameMatcher(pattern string) (func(string) bool, error) {
	not := strings.HasPrefix(pattern, "!")
	pat := strings.TrimPrefix(pattern, "!")
	var expr string
	if re, ok := strings.CutPrefix(pat, "~"); ok {
		expr = re
	} else {
		expr = strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pat))
	}
	if pat == "" || expr == "" {
		return nil, fmt.Errorf("pattern %q matches no name: give a name, a glob such as public-*, or ~ and a regular expression", pattern)
	}
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	return func(name string) bool { return re.MatchString(name) != not }, nil
}

// tagList parses a floating-subnet-tags value: comma-separated tags, any of
// which must be present; "&" first: all of them; "!" first (before "&"):
// the condition negated.
func tagList(v string) (tags []string, not, all bool) {
	v, not = strings.CutPrefix(v, "!")
	v, all = strings.CutPrefix(v, "&")
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return tags, not, all
}

// tagMatcher reports whether a subnet's tags satisfy a tag list.
func tagMatcher(v string) func([]string) bool {
	tags, not, all := tagList(v)
	return func(have []string) bool {
		n := 0
		for _, t := range tags {
			if slices.Contains(have, t) {
				n++
			}
		}
		ok := n > 0
		if all {
			ok = n == len(tags)
		}
		return ok != not
	}
}

// validateSubnetSpec checks a name pattern and a tag list.
func validateSubnetSpec(name, tags string) error {
	if name != "" {
		if _, err := nameMatcher(name); err != nil {
			return err
		}
	}
	if t, _, _ := tagList(tags); tags != "" && len(t) == 0 {
		return fmt.Errorf("tags %q list no tag: write e.g. public or &public,ipv4 or !internal", tags)
	}
	return nil
}

// tagListOpts narrows Neutron's subnet listing to the tag condition.
// Neutron's not-tags excludes subnets carrying all the tags, not-tags-any
// those carrying any. (cloud-provider-openstack sends these two the other
// way round, so its listing disagrees with its documented rule; this
// follows the rule.)
func tagListOpts(opts *subnets.ListOpts, v string) {
	tags, not, all := tagList(v)
	joined := strings.Join(tags, ",")
	switch {
	case all && not:
		opts.NotTags = joined
	case all:
		opts.Tags = joined
	case not:
		opts.NotTagsAny = joined
	default:
		opts.TagsAny = joined
	}
}

// matchingSubnets lists the subnets of the floating network the spec
// matches, in Neutron's order.
func matchingSubnets(ctx context.Context, c *gophercloud.ServiceClient, networkID string, s floatingSubnetSpec) ([]subnets.Subnet, error) {
	opts := subnets.ListOpts{NetworkID: networkID}
	if s.tags != "" {
		tagListOpts(&opts, s.tags)
	}
	pages, err := subnets.List(c, opts).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing subnets of floating network %s: %w", networkID, err)
	}
	all, err := subnets.ExtractSubnets(pages)
	if err != nil {
		return nil, fmt.Errorf("listing subnets of floating network %s: %w", networkID, err)
	}
	nameOK := func(string) bool { return true }
	if s.name != "" {
		if nameOK, err = nameMatcher(s.name); err != nil {
			return nil, err
		}
	}
	tagsOK := func([]string) bool { return true }
	if s.tags != "" {
		tagsOK = tagMatcher(s.tags)
	}
	var out []subnets.Subnet
	for _, sn := range all {
		if sn.NetworkID == networkID && nameOK(sn.Name) && tagsOK(sn.Tags) {
			out = append(out, sn)
		}
	}
	return out, nil
}

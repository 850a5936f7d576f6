package openstack

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestFloatingSubnetMatchers: cloud-provider-openstack's floating-subnet
// patterns (name, glob, ~regexp, !negation; the whole name) and
// floating-subnet-tags lists (any, &all, !none, !&not all).
func TestFloatingSubnetMatchers(t *testing.T) {
	for _, tt := range []struct {
		pattern, name string
		want          bool
	}{
		{"public", "public", true}, {"public", "public-2", false}, {"public-*", "public-2", true}, {"pub?ic", "public", true},
		{"pub.ic", "public", false}, {"~pub.ic", "public", true}, {"~pub", "public", false}, {"~^(a|b)-[0-9]+$", "b-12", true},
		{"!public-*", "public-2", false}, {"!public-*", "private", true}, {"!~p.*", "dmz", true},
	} {
		m, err := nameMatcher(tt.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tt.pattern, err)
		}
		if got := m(tt.name); got != tt.want {
			t.Errorf("pattern %q, name %q: %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
	for _, bad := range []string{"", "!", "~", "~(", "!~[a-"} {
		if _, err := nameMatcher(bad); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
	for _, tt := range []struct {
		tags string
		have []string
		want bool
	}{
		{"a,b", []string{"b"}, true}, {"a,b", []string{"c"}, false}, {"&a,b", []string{"a"}, false}, {"&a, b", []string{"b", "a"}, true},
		{"!a,b", []string{"b"}, false}, {"!a,b", []string{"c"}, true}, {"!&a,b", []string{"a"}, true}, {"!&a,b", []string{"a", "b"}, false},
	} {
		if got := tagMatcher(tt.tags)(tt.have); got != tt.want {
			t.Errorf("tags %q, subnet tags %q: %v, want %v", tt.tags, tt.have, got, tt.want)
		}
		// Neutron's filters, as the fake applies them, agree.
		q := map[string]string{}
		var lo subnets.ListOpts
		tagListOpts(&lo, tt.tags)
		q["tags"], q["tags-any"], q["not-tags"], q["not-tags-any"] = lo.Tags, lo.TagsAny, lo.NotTags, lo.NotTagsAny
		if got := tagFilters(func(k string) string { return q[k] }, tt.have); got != tt.want {
			t.Errorf("tags %q as Neutron filters %v, subnet tags %q: %v, want %v", tt.tags, q, tt.have, got, tt.want)
		}
	}
	if err := validateSubnetSpec("", "!&, ,"); err == nil {
		t.Error("a tag list of no tag accepted")
	}
}

const (
	otherFloatingNet = "7b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"
	subnetPubFull    = "a1000000-0000-4000-8000-000000000001"
	subnetPubA       = "a1000000-0000-4000-8000-000000000002"
	subnetPriv       = "a1000000-0000-4000-8000-000000000003"
	subnetExtB       = "a1000000-0000-4000-8000-000000000004"
	subnetDMZ        = "a1000000-0000-4000-8000-000000000005"
	vipSubnetClass   = "b2000000-0000-4000-8000-000000000001"
	memberSubnetAnno = "b2000000-0000-4000-8000-000000000002"
)

// classSettings are load-balancer settings with two classes.
func classSettings() *LoadBalancerSettings {
	d := defaultSettingsForTest()
	d.FloatingNetworkID = floatingNet
	d.Classes = map[string]LoadBalancerClass{
		"internet": {FloatingNetworkID: otherFloatingNet, FloatingSubnetTags: "public"},
		"dmz":      {FloatingSubnetID: subnetDMZ, VIPSubnetID: vipSubnetClass, MemberSubnetID: vipSubnetClass},
	}
	return d
}

// TestParseClass: a class's settings take precedence over the floating
// and VIP annotations, not over member-subnet-id; an unknown class is a
// bad value naming the known ones; the floating subnet annotations replace
// the config's choice, the ID before pattern and tags.
func TestParseClass(t *testing.T) {
	d := classSettings()
	d.FloatingSubnet = "cfg-*"
	for _, tt := range []struct {
		name  string
		annos map[annotation.Name]string
		check func(*lbOptions) string
	}{
		{"none", nil, func(o *lbOptions) string {
			return fmt.Sprintf("%s %s %q %s", o.floatingNetworkID, o.floatingSubnet.id, o.floatingSubnet.name, o.vipSubnetID)
		}},
		{"internet over annotations", map[annotation.Name]string{AnnotationClass: "internet", AnnotationFloatingNetworkID: subnetPriv, AnnotationFloatingSubnet: "x"}, func(o *lbOptions) string {
			return fmt.Sprintf("%s %q %q %s", o.floatingNetworkID, o.floatingSubnet.name, o.floatingSubnet.tags, o.floatingSubnet.source)
		}},
		{"dmz with member-subnet-id", map[annotation.Name]string{AnnotationClass: "dmz", AnnotationVIPSubnetID: subnetPriv, AnnotationMemberSubnetID: memberSubnetAnno}, func(o *lbOptions) string {
			return fmt.Sprintf("%s %s %s %s", o.floatingSubnet.id, o.vipSubnetID, o.memberSubnetID, o.floatingNetworkID)
		}},
		{"dmz member subnet", map[annotation.Name]string{AnnotationClass: "dmz"}, func(o *lbOptions) string { return o.memberSubnetID }},
		{"subnet id before pattern", map[annotation.Name]string{AnnotationFloatingSubnetID: subnetExtB, AnnotationFloatingSubnet: "x"}, func(o *lbOptions) string {
			return fmt.Sprintf("%s %q", o.floatingSubnet.id, o.floatingSubnet.name)
		}},
		{"pattern and tags", map[annotation.Name]string{AnnotationFloatingSubnet: "!~int.*", AnnotationFloatingSubnetTags: "&a,b"}, func(o *lbOptions) string {
			return fmt.Sprintf("%q %q %v", o.floatingSubnet.name, o.floatingSubnet.tags, o.floatingSubnet.matches())
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := newService("x")
			svc.Annotations = annotations(tt.annos)
			o, err := parseOptions(svc, d)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"none":                      floatingNet + `  "cfg-*" ` + VIPSubnetForTests,
				"internet over annotations": otherFloatingNet + ` "" "public" class internet`,
				"dmz with member-subnet-id": subnetDMZ + " " + vipSubnetClass + " " + memberSubnetAnno + " " + floatingNet,
				"dmz member subnet":         vipSubnetClass,
				"subnet id before pattern":  subnetExtB + ` ""`,
				"pattern and tags":          `"!~int.*" "&a,b" true`,
			}[tt.name]
			if got := tt.check(o); got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
	for _, tt := range []struct {
		key, value, want string
	}{
		{string(AnnotationClass), "nope", "no such class; known classes: dmz, internet"},
		{string(AnnotationFloatingSubnet), "~(", "error parsing regexp"},
		{string(AnnotationFloatingSubnetTags), "!&", "list no tag"},
		{string(AnnotationFloatingSubnetID), "ext", "openstack subnet list"},
	} {
		svc := newService("x", testutil.WithAnnotation(tt.key, tt.value))
		_, err := parseOptions(svc, d)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("annotation %s=%q", tt.key, tt.value)) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s=%q: error %v, want one naming it and %q", tt.key, tt.value, err, tt.want)
		}
	}
	_, err := parseOptions(newService("x", withAnnotation(AnnotationClass, "dmz")), defaultSettingsForTest())
	if err == nil || !strings.Contains(err.Error(), "defines no classes (loadBalancer.classes)") {
		t.Errorf("a class without classes configured: %v", err)
	}
}

// TestClassConfig: classes are validated with the rest of the section.
func TestClassConfig(t *testing.T) {
	l := LoadBalancerSettings{VIPSubnetID: VIPSubnetForTests, FloatingSubnet: "~[", Classes: map[string]LoadBalancerClass{
		"empty": {}, "bad": {FloatingSubnetID: "sub-1", FloatingSubnetTags: "&", VIPNetworkID: "net"}, "good": {FloatingSubnet: "public-*"},
	}}
	l.setDefaults()
	var got []string
	for _, e := range l.validate(field.NewPath("loadBalancer")) {
		got = append(got, e.Field)
	}
	want := "loadBalancer.floatingSubnet loadBalancer.classes[bad].vipNetworkID loadBalancer.classes[bad].floatingSubnetID loadBalancer.classes[bad].floatingSubnetTags loadBalancer.classes[empty]"
	if strings.Join(got, " ") != want {
		t.Errorf("errors at %q, want %q", strings.Join(got, " "), want)
	}
}

// TestServiceControllerClassAndFloatingSubnets drives the upstream service
// controller on the real Octavia, with Neutron on the testhelper mux: a
// class's floating network and subnet tags, a floating-subnet pattern and a
// floating-subnet-id each pick the floating IP's subnet (a full matching
// subnet is skipped for the next); an unknown class or a subnet Neutron
// refuses gives a Warning event and changes nothing; removing the
// annotations keeps the floating IP (they are read when it is allocated).
func TestServiceControllerClassAndFloatingSubnets(t *testing.T) {
	t.Parallel()
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	for _, s := range []FakeSubnet{
		{ID: subnetPubFull, Name: "pub-full", NetworkID: otherFloatingNet, Prefix: "198.51.100.", Tags: []string{"public"}, Full: true},
		{ID: subnetPriv, Name: "priv", NetworkID: otherFloatingNet, Prefix: "198.51.101."},
		{ID: subnetPubA, Name: "pub-a", NetworkID: otherFloatingNet, Prefix: "198.51.102.", Tags: []string{"public"}},
		{ID: subnetExtB, Name: "ext-b1", NetworkID: floatingNet, Prefix: "203.0.113."},
		{ID: subnetDMZ, Name: "dmz", NetworkID: floatingNet, Prefix: "192.0.2."},
	} {
		f.AddSubnet(s)
	}
	e := newSvcEnv(t, func(s *Settings) {
		s.Endpoints.Network = f.NetworkURL()
		s.LoadBalancer.FloatingNetworkID = floatingNet
		s.LoadBalancer.Classes = map[string]LoadBalancerClass{"internet": {FloatingNetworkID: otherFloatingNet, FloatingSubnetTags: "public"}}
	}, readyNode("n1", "10.23.0.1", nil))
	svcs := map[string]*corev1.Service{
		"by-class":   newService("by-class", withAnnotation(AnnotationClass, "internet")),
		"by-pattern": newService("by-pattern", withAnnotation(AnnotationFloatingSubnet, "~ext-b[0-9]+")),
		"by-id":      newService("by-id", withAnnotation(AnnotationFloatingSubnetID, subnetDMZ)),
	}
	wantFIP := map[string]struct{ subnet, prefix string }{"by-class": {subnetPubA, "198.51.102."}, "by-pattern": {subnetExtB, "203.0.113."}, "by-id": {subnetDMZ, "192.0.2."}}
	for _, svc := range svcs {
		t.Cleanup(func() { deleteConverged(t, e.cloud.lb, svc) })
		e.apply(t, svc)
	}
	addrs := map[string]string{}
	for name, svc := range svcs {
		e.waitDetail(t, svc, "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1", func(st corev1.LoadBalancerStatus) error {
			if len(st.Ingress) != 1 || !strings.HasPrefix(st.Ingress[0].IP, wantFIP[name].prefix) {
				return fmt.Errorf("status %+v: want a floating IP from %s", st, wantFIP[name].prefix)
			}
			addrs[name] = st.Ingress[0].IP
			return nil
		})
		if got := f.FloatingIPs()[addrs[name]]; got.SubnetID != wantFIP[name].subnet {
			t.Errorf("%s: floating IP %+v, want it from subnet %s", name, got, wantFIP[name].subnet)
		}
	}
	if n := f.CallCount("POST /network/v2.0/floatingips"); n != 4 {
		t.Errorf("%d floating IP allocations, want 4 (the full subnet tried once)", n)
	}

	octaviaBefore, neutronBefore := len(e.octavia.Writes()), f.Mutates.Load()
	bad := newService("by-class", withAnnotation(AnnotationClass, "nope"))
	e.apply(t, bad)
	eventuallyOn(t, 30*time.Second, "a Warning event naming the class", func() error {
		for _, w := range e.warnings(t, "by-class") {
			if strings.HasPrefix(w, annotation.ReasonInvalid+": ") && strings.Contains(w, string(AnnotationClass)+`="nope"`) && strings.Contains(w, "known classes: internet") {
				return nil
			}
		}
		return fmt.Errorf("no event: %q", e.warnings(t, "by-class"))
	})
	if w := e.octavia.Writes()[octaviaBefore:]; len(w) != 0 || f.Mutates.Load() != neutronBefore {
		t.Errorf("an unknown class changed Octavia %q or Neutron (%d calls)", w, f.Mutates.Load()-neutronBefore)
	}
	for _, name := range []string{"by-class", "by-pattern", "by-id"} {
		e.apply(t, newService(name))
	}
	time.Sleep(3 * time.Second) // Let the controller act on the removals.
	for name := range svcs {
		if got := e.service(t, name).Status.LoadBalancer.Ingress; len(got) != 1 || got[0].IP != addrs[name] {
			t.Errorf("%s after its annotations were removed: status %+v, want %s kept", name, got, addrs[name])
		}
	}
	if w := e.octavia.Writes()[octaviaBefore:]; len(w) != 0 || f.Mutates.Load() != neutronBefore {
		t.Errorf("removing the annotations changed Octavia %q or Neutron (%d calls)", w, f.Mutates.Load()-neutronBefore)
	}

	refused := newService("refused", withAnnotation(AnnotationFloatingSubnetID, subnetPubA))
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, refused) })
	e.apply(t, refused)
	eventuallyOn(t, 120*time.Second, "a Warning event for the subnet Neutron refuses", func() error {
		for _, w := range e.warnings(t, "refused") {
			if strings.HasPrefix(w, reasonFloatingSubnet+": ") && strings.Contains(w, subnetPubA) && strings.Contains(w, string(AnnotationFloatingSubnetID)) {
				return nil
			}
		}
		return fmt.Errorf("no %s event: %q", reasonFloatingSubnet, e.warnings(t, "refused"))
	})
	if got := e.service(t, "refused").Status.LoadBalancer.Ingress; len(got) != 0 {
		t.Errorf("refused: status %+v, want none", got)
	}
}

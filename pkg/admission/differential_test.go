package admission

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// svc is a Service as the differential builds it: its annotations, type,
// externalTrafficPolicy and loadBalancerClass.
type svc struct {
	anns  map[string]string
	typ   string // "" is LoadBalancer
	local bool
	class string
}

// object is s as the policy sees it.
func (s *svc) object() any {
	if s == nil {
		return nil
	}
	o := service(s.anns)
	spec := o["spec"].(map[string]any)
	if s.typ != "" {
		spec["type"] = s.typ
	}
	if s.local {
		spec["externalTrafficPolicy"] = "Local"
	}
	if s.class != "" {
		spec["loadBalancerClass"] = s.class
	}
	return o
}

// ourClass is the class params lists; otherClass another controller's.
const (
	ourClass   = "multicloud-ccm.io/metal"
	otherClass = "service.k8s.aws/nlb"
)

// ours reports whether multicloud-ccm serves s: a LoadBalancer with no
// class or one it lists.
func (s *svc) ours() bool {
	return s != nil && s.typ == "" && (s.class == "" || s.class == ourClass)
}

// read is what the controller's reader says of spec's value on s in the
// cluster c (nil: accepted, or not read for this Service).
func read(spec annotation.Spec, s *svc, c annotation.Cluster) error {
	return spec.CheckIn(s.anns, s.local, c)
}

// wantRefused is the policy's contract for spec on an update from old to
// cur (old nil: a create): refused, with the reader's message, when
// multicloud-ccm serves cur, the reader refuses the value and the value
// did not matter on old unchanged (old was no LoadBalancer of ours, the
// value was set otherwise, or it was not read: no HTTP health check; or
// it is read more strictly now: a kube-vip address annotation that was
// the backend's, marked, and is the user's request now).
func wantRefused(spec annotation.Spec, old, cur *svc, c annotation.Cluster) error {
	k := string(spec.Name)
	v, set := cur.anns[k]
	if !set || !cur.ours() {
		return nil
	}
	if old.ours() && old.anns[k] == v && hasKey(old.anns, k) {
		httpKept := !spec.HTTPHealthCheckOnly || annotation.HTTPHealthCheck(old.anns, old.local)
		requestKept := !spec.KubeVIPRequest(cur.anns, c) || spec.KubeVIPRequest(old.anns, c)
		if httpKept && requestKept {
			return nil
		}
	}
	return read(spec, cur, c)
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// scenarios are the updates (and the create) the differential tries
// spec's value v with: created; added by an update; changed from another
// value; kept while the Service turns LoadBalancer, from another
// controller's class to ours, or (values read only with an HTTP health
// check) while the health check turns HTTP by annotation or by
// externalTrafficPolicy Local; kept as it was on a LoadBalancer of ours.
func scenarios(spec annotation.Spec, v, other string) map[string][2]*svc {
	k := string(spec.Name)
	with := func(extra map[string]string, val string) map[string]string {
		m := map[string]string{k: val}
		for a, b := range extra {
			m[a] = b
		}
		return m
	}
	var ctx map[string]string
	if spec.HTTPHealthCheckOnly {
		ctx = map[string]string{string(annotation.AWSHealthCheckProtocol): "HTTP"}
	}
	out := map[string][2]*svc{
		"create":                  {nil, {anns: with(ctx, v)}},
		"added":                   {{anns: ctx}, {anns: with(ctx, v)}},
		"changed":                 {{anns: with(ctx, other)}, {anns: with(ctx, v)}},
		"kept, turned LB":         {{anns: with(ctx, v), typ: "ClusterIP"}, {anns: with(ctx, v)}},
		"kept, class turned ours": {{anns: with(ctx, v), class: otherClass}, {anns: with(ctx, v), class: ourClass}},
		"kept, other class":       {{anns: with(ctx, v), class: otherClass}, {anns: with(ctx, v), class: otherClass}},
		"kept":                    {{anns: with(ctx, v)}, {anns: with(ctx, v), local: true}},
	}
	if spec.HTTPHealthCheckOnly {
		p := string(annotation.AWSHealthCheckProtocol)
		out["kept, turned HTTP by annotation"] = [2]*svc{{anns: with(map[string]string{p: "TCP"}, v)}, {anns: with(map[string]string{p: "HTTP"}, v)}}
		out["kept, turned HTTP by Local"] = [2]*svc{{anns: with(nil, v)}, {anns: with(nil, v), local: true}}
		out["kept, HTTP by Local"] = [2]*svc{{anns: with(nil, v), local: true}, {anns: with(nil, v), local: true}}
		out["kept, turned TCP"] = [2]*svc{{anns: with(ctx, v)}, {anns: with(map[string]string{p: "tcp"}, v)}}
	}
	if spec.KubeVIPMark != "" {
		marked := map[string]string{string(spec.KubeVIPMark): "true"}
		out["marked"] = [2]*svc{nil, {anns: with(marked, v)}}
		out["kept, mark removed"] = [2]*svc{{anns: with(marked, v)}, {anns: with(nil, v)}}
		out["kept, marked"] = [2]*svc{{anns: with(marked, v)}, {anns: with(marked, v), local: true}}
		out["kept, marked by the user"] = [2]*svc{{anns: with(nil, v)}, {anns: with(marked, v)}}
	}
	return out
}

// generated are n values made, with a seeded generator, from pieces of
// spec's samples: joined by commas, trimmed, repeated, cut, with a sign
// or a unit: values nobody wrote by hand.
func generated(spec annotation.Spec, seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, uint64(len(spec.Name))))
	samples := Samples(spec)
	pick := func() string { return samples[r.IntN(len(samples))] }
	pieces := []func(string) string{
		func(s string) string { return s + "," + pick() },
		func(s string) string { return " " + s },
		func(s string) string { return s + " " },
		func(s string) string { return "-" + s },
		func(s string) string { return s + "ns" },
		func(s string) string { return "0." + s },
		func(s string) string {
			// Cut at a character: an annotation is valid UTF-8 (JSON).
			rs := []rune(s)
			if len(rs) < 2 {
				return s
			}
			return string(rs[:r.IntN(len(rs))])
		},
		func(s string) string { return strings.ToUpper(s) },
		func(s string) string { return s + "=" + pick() },
		func(s string) string { return s + "%eth0" },
	}
	out := make([]string, n)
	for i := range out {
		v := pick()
		for range 1 + r.IntN(3) {
			v = pieces[r.IntN(len(pieces))](v)
		}
		out[i] = v
	}
	return out
}

// everyValue are the update scenarios tried with every sample value; the
// others are tried with every everyNth one (a different share for each
// annotation), and generated values with a create and a Service turned
// LoadBalancer: the whole policy is evaluated each time, and ~30,000
// evaluations take a minute on a shared 2-core machine. The create of
// every sample is TestPolicyAgreesWithReaders'.
var everyValue = map[string]bool{"kept, turned LB": true, "kept, turned HTTP by annotation": true, "kept, turned HTTP by Local": true, "kept, mark removed": true}

const everyNth = 8

// try reports whether scenario is tried with the j-th value of
// annotation i, of which the first samples are samples.
func try(scenario string, i, j, samples int) bool {
	if j >= samples {
		return scenario == "create" || scenario == "kept, turned LB"
	}
	return scenario != "create" && (everyValue[scenario] || j%everyNth == i%everyNth)
}

// TestAdmissionDifferential: for every annotation of the registry the
// policy checks, every sample value (the edge cases) and generated ones,
// the generated policy and the controller's reader agree on a create and
// on every kind of update: refused, with the reader's message, exactly
// when the reader refuses the value and it is new, changed, or starts to
// matter with the update (the Service turned LoadBalancer or ours, its
// health check turned HTTP); admitted when it is unchanged and mattered
// before (checked then, or written before the policy). kube-vip's address
// annotation is tried in a cluster whose bare-metal backend announces
// through kube-vip too (the parameter's kubeVIP), where a value the user
// wrote is that backend's request (0.0.0.0, 127.0.0.1, fe80::1, empty,
// names: refused), on Services with and without the backend's mark.
func TestAdmissionDifferential(t *testing.T) {
	p := newPolicy(t, Deny)
	known := []string{"aws", "metal"}
	for i, s := range annotation.Registry {
		if _, _, ok := celCheck(s, "v", "''"); !ok {
			continue
		}
		for _, c := range clusters(s, known) {
			name := string(s.Name)
			if c.KubeVIP {
				name += "/announce=kube-vip"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel() // the compiled programs are only read: both cores evaluate
				differential(t, p, i, s, c)
			})
		}
	}
}

// clusters are the clusters spec is tried in: one whose backends are
// known, and for kube-vip's address annotation the same with a bare-metal
// backend announcing through kube-vip.
func clusters(spec annotation.Spec, known []string) []annotation.Cluster {
	out := []annotation.Cluster{{Backends: known}}
	if spec.KubeVIPMark != "" {
		out = append(out, annotation.Cluster{Backends: known, KubeVIP: true})
	}
	return out
}

// paramsOf is the parameter ConfigMap of the cluster c.
func paramsOf(c annotation.Cluster) map[string]any {
	p := params(strings.Join(c.Backends, ","))
	if c.KubeVIP {
		p["data"].(map[string]any)["kubeVIP"] = "true"
	}
	return p
}

// differential tries the i-th annotation of the registry, spec, in the
// cluster c with its samples and generated values.
func differential(t *testing.T, p *policy, i int, spec annotation.Spec, c annotation.Cluster) {
	param := paramsOf(c)
	samples := Samples(spec)
	values := append(samples, generated(spec, uint64(i), 16)...)
	for j, v := range values {
		other := values[(j+1)%len(values)]
		if other == v {
			other += "x"
		}
		for name, sc := range scenarios(spec, v, other) {
			if !try(name, i, j, len(samples)) {
				continue
			}
			want := wantRefused(spec, sc[0], sc[1], c)
			got := p.eval(t, sc[1].object(), sc[0].object(), param)
			differs(t, spec, name, v, want, got, sc[1].ours())
		}
	}
}

// differs reports where the policy's answer got is not the reader's want.
// A duration beyond Go's is an evaluation error where the reader refuses
// it, and on a Service not ours: the API server evaluates variables
// lazily, so the validation's !variables.ours never reaches the value,
// while eval here evaluates every variable.
func differs(t *testing.T, s annotation.Spec, scenario, v string, want error, got []string, ours bool) {
	t.Helper()
	if len(got) == 1 && strings.HasPrefix(got[0], evalError) {
		if (want == nil && ours) || s.Kind != annotation.KindDuration || !overflows[strings.TrimSpace(v)] {
			t.Errorf("%s %q: %s (reader: %v)", scenario, v, got[0], want)
		}
		return
	}
	var mine []string
	for _, m := range got {
		if strings.HasPrefix(m, "annotation "+string(s.Name)) {
			mine = append(mine, m)
		}
	}
	switch {
	case want == nil && len(got) > 0:
		t.Errorf("%s %q: the reader's contract admits it, the policy says %q", scenario, v, got)
	case want != nil && len(got) == 0:
		t.Errorf("%s %q: the reader refuses it (%v), the policy admits it", scenario, v, want)
	case want != nil && (len(mine) != 1 || len(got) != 1 || mine[0] != want.Error()):
		t.Errorf("%s %q: messages differ:\nreader: %s\npolicy: %s", scenario, v, want, strings.Join(got, " | "))
	}
}

// TestValuesThatStartToMatter (defect 5): an update that keeps a value the
// policy never checked is refused when the update makes the controller
// read it: a ClusterIP Service turned LoadBalancer keeping
// aws-load-balancer-scheme: public; a health-check path kept while the
// health check turns HTTP, by the protocol annotation or by
// externalTrafficPolicy Local. Kept on a LoadBalancer whose health check
// was HTTP already, the same values are admitted (written before the
// policy).
func TestValuesThatStartToMatter(t *testing.T) {
	p := newPolicy(t, Deny)
	const (
		scheme = "service.beta.kubernetes.io/aws-load-balancer-scheme"
		path   = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-path"
		proto  = string(annotation.AWSHealthCheckProtocol)
	)
	for name, c := range map[string]struct {
		old, cur *svc
		refused  bool
	}{
		"ClusterIP turned LoadBalancer":       {&svc{anns: map[string]string{scheme: "public"}, typ: "ClusterIP"}, &svc{anns: map[string]string{scheme: "public"}}, true},
		"health check turned HTTP":            {&svc{anns: map[string]string{path: "healthz"}}, &svc{anns: map[string]string{path: "healthz", proto: "HTTP"}}, true},
		"externalTrafficPolicy turned Local":  {&svc{anns: map[string]string{path: "healthz"}}, &svc{anns: map[string]string{path: "healthz"}, local: true}, true},
		"LoadBalancer kept":                   {&svc{anns: map[string]string{scheme: "public"}}, &svc{anns: map[string]string{scheme: "public", "x": "y"}}, false},
		"HTTP health check kept":              {&svc{anns: map[string]string{path: "healthz", proto: "HTTP"}}, &svc{anns: map[string]string{path: "healthz", proto: "http"}}, false},
		"TCP health check kept (not read)":    {&svc{anns: map[string]string{path: "healthz"}}, &svc{anns: map[string]string{path: "healthz", "x": "y"}}, false},
		"another class turned ClusterIP, out": {&svc{anns: map[string]string{scheme: "public"}, class: otherClass}, &svc{anns: map[string]string{scheme: "public"}, class: otherClass}, false},
	} {
		got := p.eval(t, c.cur.object(), c.old.object(), params(""))
		if (len(got) > 0) != c.refused {
			t.Errorf("%s: policy says %q, want refused %v", name, got, c.refused)
		}
	}
}

// TestDrainRoundsToZero (defect 6): a negative drain period that
// time.ParseDuration rounds to 0 is a drain of 0 for the router and the
// reader, and the policy admits it; one that does not round to 0 is
// refused by all.
func TestDrainRoundsToZero(t *testing.T) {
	p := newPolicy(t, Deny)
	s, _ := annotation.Lookup(annotation.LoadBalancerDrain)
	for _, v := range []string{"-0.1ns", "-0.9ns", "-0ns", "-0.0001s", "-1ns", "-0.5us", "-1.5ns"} {
		goErr := s.Check(v, nil)
		got := p.eval(t, service(map[string]string{string(s.Name): v}), nil, params(""))
		if fmt.Sprint(got) != fmt.Sprint(errs(goErr)) {
			t.Errorf("%q: policy %q, reader %v", v, got, goErr)
		}
	}
}

// TestKubeVIPRequests (issue 43): where a bare-metal backend announces
// through kube-vip, a kube-vip.io/loadbalancerIPs value the user wrote is
// that backend's request, and the policy refuses what the backend refuses
// (0.0.0.0, 127.0.0.1, fe80::1, empty, a name, two of one family), with
// the backend's message naming the annotation and the fix. A value the
// backend wrote (marked) and any value without announce: kube-vip are
// read as kube-vip reads them: those admitted.
func TestKubeVIPRequests(t *testing.T) {
	p := newPolicy(t, Deny)
	s, _ := annotation.Lookup("kube-vip.io/loadbalancerIPs")
	const mark = "multicloud-ccm.io/kube-vip-announced"
	kv := paramsOf(annotation.Cluster{KubeVIP: true})
	for _, v := range []string{"0.0.0.0", "::", "127.0.0.1", "fe80::1", "", " ", "lb.example.com", "224.0.0.1", "ff02::1", "169.254.1.1", "192.0.2.1,192.0.2.2", "192.0.2.1,", "fe80::1%eth0", "::ffff:192.0.2.1"} {
		anns := map[string]string{string(s.Name): v}
		got := p.eval(t, service(anns), nil, kv)
		_, want := annotation.ParseKubeVIPIPs(s.Name, v)
		if want == nil || len(got) != 1 || got[0] != want.Error() {
			t.Errorf("%q under announce: kube-vip: policy %q, backend's reading %v", v, got, want)
		}
		if len(got) == 1 && (!strings.HasPrefix(got[0], "annotation kube-vip.io/loadbalancerIPs=") || !strings.Contains(got[0], "write one address per IP family")) {
			t.Errorf("%q: the message names neither the annotation nor the fix: %s", v, got[0])
		}
		anns[mark] = "true"
		if got := p.eval(t, service(anns), nil, kv); fmt.Sprint(got) != fmt.Sprint(errs(s.Check(v, nil))) {
			t.Errorf("%q marked as the backend's: policy %q, want kube-vip's reading %v", v, got, s.Check(v, nil))
		}
	}
	for _, v := range []string{"192.0.2.10", " 192.0.2.10 , 2001:db8::10 "} {
		if got := p.eval(t, service(map[string]string{string(s.Name): v}), nil, kv); len(got) != 0 {
			t.Errorf("%q under announce: kube-vip refused: %q", v, got)
		}
	}
	for _, v := range []string{"0.0.0.0", "127.0.0.1", "fe80::1", "", "lb.example.com"} {
		if got := p.eval(t, service(map[string]string{string(s.Name): v}), nil, params("")); len(got) != 0 {
			t.Errorf("%q without announce: kube-vip (kube-vip's own reading) refused: %q", v, got)
		}
	}
}

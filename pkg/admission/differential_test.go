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

// read is what the controller's reader says of spec's value on s (nil:
// accepted, or not read for this Service).
func read(spec annotation.Spec, s *svc, known []string) error {
	return spec.CheckService(s.anns, s.local, known)
}

// wantRefused is the policy's contract for spec on an update from old to
// cur (old nil: a create): refused, with the reader's message, when
// multicloud-ccm serves cur, the reader refuses the value and the value
// did not matter on old unchanged (old was no LoadBalancer of ours, the
// value was set otherwise, or it was not read: no HTTP health check).
func wantRefused(spec annotation.Spec, old, cur *svc, known []string) error {
	k := string(spec.Name)
	v, set := cur.anns[k]
	if !set || !cur.ours() {
		return nil
	}
	if old.ours() && old.anns[k] == v && hasKey(old.anns, k) {
		if !spec.HTTPHealthCheckOnly || annotation.HTTPHealthCheck(old.anns, old.local) {
			return nil
		}
	}
	return read(spec, cur, known)
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
var everyValue = map[string]bool{"kept, turned LB": true, "kept, turned HTTP by annotation": true, "kept, turned HTTP by Local": true}

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
// before (checked then, or written before the policy).
func TestAdmissionDifferential(t *testing.T) {
	p := newPolicy(t, Deny)
	known := []string{"aws", "metal"}
	param := params(strings.Join(known, ","))
	for i, s := range annotation.Registry {
		if _, _, ok := celCheck(s, "v", "''"); !ok {
			continue
		}
		t.Run(string(s.Name), func(t *testing.T) {
			t.Parallel() // the compiled programs are only read: both cores evaluate
			samples := Samples(s)
			values := append(samples, generated(s, uint64(i), 16)...)
			for j, v := range values {
				other := values[(j+1)%len(values)]
				if other == v {
					other += "x"
				}
				for name, sc := range scenarios(s, v, other) {
					if !try(name, i, j, len(samples)) {
						continue
					}
					want := wantRefused(s, sc[0], sc[1], known)
					got := p.eval(t, sc[1].object(), sc[0].object(), param)
					differs(t, s, name, v, want, got, sc[1].ours())
				}
			}
		})
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

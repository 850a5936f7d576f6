package admission

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// minVersion is the oldest Kubernetes whose CEL the policies use
// (two-variable comprehensions came in 1.32); the chart renders them only
// from there on.
var minVersion = version.MajorMinor(1, 32)

// env is the API server's CEL environment for new expressions at
// minVersion, with the variables a ValidatingAdmissionPolicy sees.
func env(t testing.TB) *cel.Env {
	t.Helper()
	base, err := environment.MustBaseEnvSet(minVersion).Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	e, err := base.Extend(
		cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType),
		cel.Variable("params", cel.DynType), cel.Variable("request", cel.DynType),
		cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
	)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// program compiles one expression; compilation and the cost estimate must
// pass as the API server checks them.
func program(t testing.TB, e *cel.Env, expr string) cel.Program {
	t.Helper()
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("%.300s\ndoes not compile: %.2000v", expr, iss.Err())
	}
	p, err := e.Program(ast, cel.CostLimit(1_000_000))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// policy evaluates the generated policy in-process.
type policy struct {
	vars        []named
	validations []compiled
}

type named struct {
	name string
	prog cel.Program
}

type compiled struct {
	expr, message cel.Program
}

// compiledPolicies caches newPolicy's work (compiling the deny policy
// takes seconds) across tests, by policy.
var compiledPolicies sync.Map

func newPolicy(t testing.TB, f func() ([]admissionv1.Variable, []admissionv1.Validation)) *policy {
	t.Helper()
	vars, vs := f()
	key := fmt.Sprint(len(vars), len(vs), vs[0].Expression)
	if p, ok := compiledPolicies.Load(key); ok {
		return p.(*policy)
	}
	p := compilePolicy(t, vars, vs)
	compiledPolicies.Store(key, p)
	return p
}

func compilePolicy(t testing.TB, vars []admissionv1.Variable, vs []admissionv1.Validation) *policy {
	t.Helper()
	e := env(t)
	p := &policy{}
	for _, v := range vars {
		p.vars = append(p.vars, named{v.Name, program(t, e, v.Expression)})
	}
	for _, v := range vs {
		p.validations = append(p.validations, compiled{program(t, e, v.Expression), program(t, e, v.MessageExpression)})
	}
	return p
}

// service is a Service as the policy sees it (unstructured).
func service(annotations map[string]string) map[string]any {
	m := map[string]any{}
	for k, v := range annotations {
		m[k] = v
	}
	return map[string]any{"metadata": map[string]any{"name": "web", "namespace": "default", "annotations": m}, "spec": map[string]any{"type": "LoadBalancer"}}
}

// params is the parameter ConfigMap.
func params(backends string) map[string]any {
	return map[string]any{"data": map[string]any{"backends": backends, "classes": "multicloud-ccm.io/metal"}}
}

// eval runs every validation and returns the messages of those that fail.
func (p *policy) eval(t testing.TB, object, oldObject, param any) []string {
	t.Helper()
	in := map[string]any{"object": object, "oldObject": oldObject, "params": param, "request": map[string]any{}}
	vars := map[string]any{}
	in["variables"] = vars
	for _, v := range p.vars {
		out, _, err := v.prog.Eval(in)
		if err != nil {
			return []string{fmt.Sprintf("%svariable %s: %v", evalError, v.name, err)}
		}
		vars[v.name] = out
	}
	var msgs []string
	for i, v := range p.validations {
		out, _, err := v.expr.Eval(in)
		if err != nil {
			return []string{fmt.Sprintf("%s%d: %v", evalError, i, err)}
		}
		if out.Value() == true {
			continue
		}
		m, _, err := v.message.Eval(in)
		if err != nil {
			t.Fatalf("message of validation %d: %v", i, err)
		}
		msgs = append(msgs, m.Value().(string))
	}
	return msgs
}

// evalError starts eval's answer when an expression fails: the API server
// then applies the policy's failurePolicy (Fail: refused).
const evalError = "evaluation error: "

// overflows are the values the CEL refuses by an evaluation error rather
// than a message: durations beyond int64 nanoseconds.
var overflows = map[string]bool{"2562048h": true, "99999999999999999999h": true}

// TestPolicyAgreesWithReaders: for every annotation of the registry and
// every sample value, the generated CEL admits exactly what the Go reader
// accepts, and refuses the rest with the reader's message. An annotation
// read only with an HTTP health check is tried with and without one.
func TestPolicyAgreesWithReaders(t *testing.T) {
	p := newPolicy(t, Deny)
	known := []string{"aws", "metal"} // sorted, as the chart renders them
	for _, s := range annotation.Registry {
		if _, _, ok := celCheck(s, "v", "''"); !ok {
			continue
		}
		t.Run(string(s.Name), func(t *testing.T) {
			t.Parallel() // the compiled programs are only read, as in TestAdmissionDifferential
			for _, c := range clusters(s, known) {
				for _, with := range contexts(s) {
					for _, v := range Samples(s) {
						anns := map[string]string{string(s.Name): v}
						for k, x := range with {
							anns[k] = x
						}
						agree(t, p, s, anns, c)
					}
				}
			}
		})
	}
}

// contexts are the other annotations an annotation is tried beside.
func contexts(s annotation.Spec) []map[string]string {
	switch {
	case s.HTTPHealthCheckOnly:
		return []map[string]string{nil, {string(annotation.AWSHealthCheckProtocol): "HTTP"}}
	case s.KubeVIPMark != "":
		return []map[string]string{nil, {string(s.KubeVIPMark): "true"}, {string(s.KubeVIPMark): "false"}}
	}
	return []map[string]string{nil}
}

// agree checks that the policy says of a Service with anns what the
// reader says of s's value in the cluster c.
func agree(t *testing.T, p *policy, s annotation.Spec, anns map[string]string, c annotation.Cluster) {
	t.Helper()
	v := anns[string(s.Name)]
	goErr := s.CheckIn(anns, false, c)
	msgs := p.eval(t, service(anns), nil, paramsOf(c))
	if len(msgs) == 1 && strings.HasPrefix(msgs[0], evalError) {
		if goErr == nil || s.Kind != annotation.KindDuration || !overflows[v] {
			t.Errorf("%q: %s (reader: %v)", v, msgs[0], goErr)
		}
		return
	}
	switch {
	case goErr == nil && len(msgs) > 0:
		t.Errorf("%q: the reader accepts it, the policy says %q", v, msgs)
	case goErr != nil && len(msgs) == 0:
		t.Errorf("%q: the reader refuses it (%v), the policy admits it", v, goErr)
	case goErr != nil && (len(msgs) != 1 || msgs[0] != goErr.Error()):
		t.Errorf("%q: messages differ:\nreader: %s\npolicy: %s", v, goErr, strings.Join(msgs, " | "))
	}
}

// TestBackendNamesUnknown: without the backends in the parameter (the
// chart rendered with an existing cloud-config Secret) only the form of
// the backend annotation is checked.
func TestBackendNamesUnknown(t *testing.T) {
	p := newPolicy(t, Deny)
	s, _ := annotation.Lookup(annotation.LoadBalancerBackend)
	for _, v := range []string{"anything", "a,b", "a,,b", "a,a", ""} {
		goErr := s.Check(v, nil)
		msgs := p.eval(t, service(map[string]string{string(s.Name): v}), nil, params(""))
		if got, want := fmt.Sprint(msgs), fmt.Sprint(errs(goErr)); got != want {
			t.Errorf("%q: policy %s, reader %s", v, got, want)
		}
	}
}

func errs(err error) []string {
	if err == nil {
		return nil
	}
	return []string{err.Error()}
}

// TestUnchangedValuesAdmitted: an update that keeps a bad value (written
// before the policy) is admitted; one that changes it to another bad value
// is not.
func TestUnchangedValuesAdmitted(t *testing.T) {
	p := newPolicy(t, Deny)
	const n = "loadbalancer.openstack.org/connection-limit"
	old := service(map[string]string{n: "0"})
	if msgs := p.eval(t, service(map[string]string{n: "0", "x": "y"}), old, params("")); len(msgs) != 0 {
		t.Errorf("unchanged bad value refused: %q", msgs)
	}
	if msgs := p.eval(t, service(map[string]string{n: "-5"}), old, params("")); len(msgs) != 1 {
		t.Errorf("changed bad value: %q", msgs)
	}
}

// TestOtherClassesIgnored: a Service of a class multicloud-ccm does not
// serve (another controller's) is not checked; one of a listed class is.
func TestOtherClassesIgnored(t *testing.T) {
	p := newPolicy(t, Deny)
	svc := func(class string) map[string]any {
		s := service(map[string]string{"service.beta.kubernetes.io/aws-load-balancer-scheme": "public"})
		s["spec"].(map[string]any)["loadBalancerClass"] = class
		return s
	}
	if msgs := p.eval(t, svc("service.k8s.aws/nlb"), nil, params("")); len(msgs) != 0 {
		t.Errorf("another controller's class checked: %q", msgs)
	}
	if msgs := p.eval(t, svc("multicloud-ccm.io/metal"), nil, params("")); len(msgs) != 1 {
		t.Errorf("our class not checked: %q", msgs)
	}
}

// TestWarnings: changing an annotation whose change replaces something
// warns with the consequence; other changes, creations and unchanged
// values do not.
func TestWarnings(t *testing.T) {
	p := newPolicy(t, Warn)
	const scheme = "service.beta.kubernetes.io/aws-load-balancer-scheme"
	old := service(map[string]string{scheme: "internet-facing"})
	msgs := p.eval(t, service(map[string]string{scheme: "internal"}), old, params(""))
	want := `annotation service.beta.kubernetes.io/aws-load-balancer-scheme changed from "internet-facing" to "internal": this replaces the NLB (and its DNS name): a new one is created and the old one deleted`
	if len(msgs) != 1 || msgs[0] != want {
		t.Errorf("scheme change warns %q, want %q", msgs, want)
	}
	msgs = p.eval(t, service(nil), old, params(""))
	if len(msgs) != 1 || !strings.Contains(msgs[0], `from "internet-facing" to (unset)`) {
		t.Errorf("scheme removal warns %q", msgs)
	}
	const lbID = "loadbalancer.openstack.org/load-balancer-id"
	id := "3b1f2c4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
	if msgs := p.eval(t, service(map[string]string{lbID: "4b1f2c4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f"}), service(map[string]string{lbID: id}), params("")); len(msgs) != 1 {
		t.Errorf("a changed load-balancer-id warns %q", msgs)
	}
	for name, objs := range map[string][2]any{
		"create": {service(map[string]string{scheme: "internal"}), nil},
		"the backend writing load-balancer-id back": {service(map[string]string{lbID: id}), service(nil)},
		"unchanged": {service(map[string]string{scheme: "internet-facing", "x": "y"}), old},
		"other":     {service(map[string]string{scheme: "internet-facing", "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval": "10"}), old},
	} {
		if msgs := p.eval(t, objs[0], objs[1], params("")); len(msgs) != 0 {
			t.Errorf("%s warns %q", name, msgs)
		}
	}
}

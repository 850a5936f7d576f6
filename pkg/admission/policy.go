package admission

import (
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// baseVariables are both policies' first spec.variables: the Service's
// annotations (new and old, empty when absent), the configured backends
// with load balancers from the parameter ConfigMap (empty: not known, names
// not checked), whether the Service is one multicloud-ccm may serve (no
// loadBalancerClass, or one of the classes the parameter lists), whether
// the old Service was one too (a LoadBalancer of ours: its values were
// checked, or would have been), and whether a bare-metal backend announces
// through kube-vip (the parameter's kubeVIP is "true"; annotation.Cluster).
func baseVariables() []admissionv1.Variable {
	return []admissionv1.Variable{
		{Name: "anns", Expression: "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
		{Name: "old", Expression: "oldObject != null && has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"},
		{Name: "backends", Expression: "params != null && has(params.data) && 'backends' in params.data && params.data.backends.trim() != '' ? params.data.backends.split(',').map(b, b.trim()) : []"},
		{Name: "ours", Expression: ours("object")},
		{Name: "oldOurs", Expression: "oldObject != null && has(oldObject.spec.type) && oldObject.spec.type == 'LoadBalancer' && " + ours("oldObject")},
		{Name: "kubeVIP", Expression: "params != null && has(params.data) && 'kubeVIP' in params.data && params.data.kubeVIP == 'true'"},
	}
}

// ours is true when the Service obj has no loadBalancerClass or one the
// parameter lists.
func ours(obj string) string {
	return fmt.Sprintf("(!has(%s.spec.loadBalancerClass) || (params != null && has(params.data) && 'classes' in params.data && %s.spec.loadBalancerClass in params.data.classes.split(',').map(c, c.trim())))", obj, obj)
}

// unchanged is true when the annotation k keeps a value that mattered on
// the old Service: the old Service was a LoadBalancer of ours and, for a
// value read only with an HTTP health check, had one. A value that starts
// to matter (the Service turned LoadBalancer, its health check turned
// HTTP, a kube-vip address annotation turned a request by the removal of
// the backend's mark) is checked as a new one. id is the spec's variable.
func unchanged(s annotation.Spec, id string) string {
	k := key(s)
	out := fmt.Sprintf("variables.oldOurs && %s in variables.old && variables.old[%s] == variables.anns[%s]", k, k, k)
	if s.HTTPHealthCheckOnly {
		out += " && " + httpHealthCheckOf("variables.old", "oldObject")
	}
	if s.KubeVIPMark != "" {
		out += fmt.Sprintf(" && (!variables.%s_req || %s)", id, kubeVIPRequest(s, "variables.old"))
	}
	return out
}

// key is the CEL literal of an annotation name.
func key(s annotation.Spec) string { return lit(string(s.Name)) }

// Deny is the deny policy: its variables and its one validation. Each
// checked annotation of the registry has variables a<index in the
// registry> (its value, empty when unset), a<index>_ok (it is unset,
// unchanged or good), a<index>_msg (its reader's message) and helpers
// a<index>_...; variable problems lists the messages of the bad ones, in
// registry order, and the validation refuses the Service with them joined
// by "; ", as Reader.Err joins them. A value is checked only when it is new,
// changed, or starts to matter (unchanged), so a Service admitted before
// (or with the policy off) can still be edited, and its finalizer removed,
// without fixing it first, but a value the policy never checked is not
// admitted by an update that makes the controller read it.
func Deny() ([]admissionv1.Variable, []admissionv1.Validation) {
	vars := baseVariables()
	var problems []string
	for i, s := range annotation.Registry {
		k := key(s)
		id := fmt.Sprintf("a%d", i)
		c, vs, ok := celCheck(s, id, fmt.Sprintf("%s in variables.anns ? variables.anns[%s] : ''", k, k))
		if !ok {
			continue
		}
		for _, v := range vs {
			vars = append(vars, admissionv1.Variable{Name: v.name, Expression: v.expr})
		}
		vars = append(vars,
			admissionv1.Variable{Name: id + "_ok", Expression: fmt.Sprintf("!(%s in variables.anns) || (%s) || (%s)", k, unchanged(s, id), c.valid)},
			admissionv1.Variable{Name: id + "_msg", Expression: c.message})
		problems = append(problems, fmt.Sprintf("variables.%s_ok ? '' : variables.%s_msg", id, id))
	}
	vars = append(vars, admissionv1.Variable{Name: "problems", Expression: "[" + strings.Join(problems, ", ") + "].filter(m, m != '')"})
	return vars, []admissionv1.Validation{{
		Expression:        "!variables.ours || variables.problems.size() == 0",
		MessageExpression: Escape("variables.problems.join('; ')"),
		Reason:            &invalid,
	}}
}

// invalid is the denials' reason (HTTP 422, as a field validation's).
var invalid = metav1.StatusReasonInvalid

// Warn is the warn policy: its variables and its checks, one per
// annotation whose change replaces something (Spec.Replaces), failing (so
// warning) when an update of a LoadBalancer Service changes, adds or
// removes it (changes or removes it, for one the backend writes back).
func Warn() ([]admissionv1.Variable, []admissionv1.Validation) {
	var out []admissionv1.Validation
	for _, s := range annotation.Registry {
		if s.Replaces == "" {
			continue
		}
		k := key(s)
		show := func(m string) string {
			return fmt.Sprintf("(%s in variables.%s ? strings.quote(variables.%s[%s]) : '(unset)')", k, m, m, k)
		}
		unchanged := fmt.Sprintf("((%s in variables.anns) == (%s in variables.old) && (!(%s in variables.anns) || variables.anns[%s] == variables.old[%s]))", k, k, k, k, k)
		if s.WrittenBack {
			// The backend writes it on every Service it serves: its first
			// write is no change of the user's.
			unchanged = fmt.Sprintf("!(%s in variables.old) || %s", k, unchanged)
		}
		out = append(out, admissionv1.Validation{
			Expression:        "!variables.ours || oldObject == null || oldObject.spec.type != 'LoadBalancer' || " + unchanged,
			MessageExpression: fmt.Sprintf("%s + %s + ' to ' + %s + %s", lit("annotation "+string(s.Name)+" changed from "), show("old"), show("anns"), lit(": this "+s.Replaces)),
		})
	}
	return baseVariables(), out
}

// header marks the generated files.
const header = "# Generated by \"go run ./hack/gen-docs\" from pkg/annotation's registry\n# (pkg/admission): do not edit. The chart's admission policies include it.\n"

// spec is the generated part of a policy's spec.
type spec struct {
	Variables   []admissionv1.Variable   `json:"variables"`
	Validations []admissionv1.Validation `json:"validations"`
}

// Files returns the generated chart files, by path relative to the chart:
// the deny policy's and the warn policy's variables and validations.
func Files() (map[string][]byte, error) {
	out := map[string][]byte{}
	dv, dc := Deny()
	wv, wc := Warn()
	for name, v := range map[string]spec{
		"files/admission/deny.yaml": {dv, dc},
		"files/admission/warn.yaml": {wv, wc},
	} {
		b, err := yaml.Marshal(v)
		if err != nil {
			return nil, err
		}
		out[name] = append([]byte(header), b...)
	}
	return out, nil
}

package planswitch

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
)

// awsCall is one mutating call the fake received (an SDK invocation's
// first attempt, as the fake counts calls), with the Service it is for
// ("" when nothing in it names one) and, for RegisterTargets and
// DeregisterTargets, the targets' IDs.
type awsCall struct {
	action, service string
	targets         []string
}

// awsRecorder serves the fake and attributes every mutating call to the
// Service whose resource it names, resolved before the call reaches the
// fake (a delete still finds what it deletes): a kubernetes.io/service-name
// tag in a create, or an NLB, listener, target group or security group the
// fake holds tagged for a Service.
type awsRecorder struct {
	fake  *awsfake.Server
	mu    sync.Mutex
	calls []awsCall
}

func (r *awsRecorder) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	if action := form.Get("Action"); action != "" && awsfake.IsMutating(action) && firstAttempt(req.Header.Get("amz-sdk-request")) {
		c := awsCall{action: action, service: r.serviceOf(form)}
		if strings.HasSuffix(action, "Targets") {
			c.targets = targetIDs(form)
		}
		r.mu.Lock()
		r.calls = append(r.calls, c)
		r.mu.Unlock()
	}
	r.fake.ServeHTTP(rw, req)
}

// firstAttempt tells an SDK invocation's first attempt ("amz-sdk-request:
// attempt=1; max=3") from its retries, as the fake does.
func firstAttempt(header string) bool {
	for _, part := range strings.Split(header, ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "attempt="); ok {
			return v == "1"
		}
	}
	return true
}

// Calls returns the calls recorded since the last Reset.
func (r *awsRecorder) Calls() []awsCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Reset forgets the recorded calls.
func (r *awsRecorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

func (r *awsRecorder) serviceOf(form url.Values) string {
	for k, vs := range form {
		if len(vs) == 1 && vs[0] == tagService && strings.HasSuffix(k, ".Key") {
			return form.Get(strings.TrimSuffix(k, ".Key") + ".Value")
		}
	}
	var values []string
	for _, vs := range form {
		values = append(values, vs...)
	}
	for _, lb := range r.fake.LoadBalancers() {
		for _, v := range values {
			listener := strings.Replace(v, ":listener/", ":loadbalancer/", 1)
			if v == lb.ARN || strings.HasPrefix(listener, lb.ARN+"/") {
				return lb.Tags[tagService]
			}
		}
	}
	for _, tg := range r.fake.TargetGroups() {
		if slices.Contains(values, tg.ARN) {
			return tg.Tags[tagService]
		}
	}
	for _, sg := range r.fake.SecurityGroups() {
		if slices.Contains(values, sg.ID) {
			return sg.Tags[tagService]
		}
	}
	return ""
}

// targetIDs are a (De)RegisterTargets call's targets' IDs.
func targetIDs(form url.Values) []string {
	var out []string
	for k, vs := range form {
		if strings.HasPrefix(k, "Targets.member.") && strings.HasSuffix(k, ".Id") {
			out = append(out, vs...)
		}
	}
	slices.Sort(out)
	return out
}

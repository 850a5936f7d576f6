package awsfake

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// all returns every value between before and after in body.
func all(body, before, after string) []string {
	var out []string
	for {
		_, rest, ok := strings.Cut(body, before)
		if !ok {
			return out
		}
		v, tail, _ := strings.Cut(rest, after)
		out, body = append(out, v), tail
	}
}

// TestIndexesFollowChanges checks the answers by name, by ARN and by load
// balancer against what the fake holds (scanned, as the fake answered
// before elbv2_index.go) after every kind of change: a listener moved to
// another target group, a listener deleted, a load balancer deleted (its
// listeners with it), a target group deleted, and a name used again.
func TestIndexesFollowChanges(t *testing.T) {
	s, lbs, tgs := nlbs(t, 4)
	must := func(form url.Values) string {
		t.Helper()
		code, body := call(s, elbv2Version, form)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", form.Get("Action"), code, body)
		}
		return body
	}
	// lbs[1]'s listener moves from tgs[1] to tgs[3], once lbs[3] no
	// longer forwards to it.
	l3 := between(must(url.Values{"Action": {"DescribeListeners"}, "LoadBalancerArn": {lbs[3]}}), "<ListenerArn>", "<")
	must(url.Values{"Action": {"DeleteListener"}, "ListenerArn": {l3}})
	l1 := between(must(url.Values{"Action": {"DescribeListeners"}, "LoadBalancerArn": {lbs[1]}}), "<ListenerArn>", "<")
	must(url.Values{"Action": {"ModifyListener"}, "ListenerArn": {l1}, "DefaultActions.member.1.Type": {"forward"}, "DefaultActions.member.1.TargetGroupArn": {tgs[3]}})
	must(url.Values{"Action": {"DeleteLoadBalancer"}, "LoadBalancerArn": {lbs[0]}})
	must(url.Values{"Action": {"DeleteTargetGroup"}, "TargetGroupArn": {tgs[0]}})
	// The deleted load balancer's name again: a new ARN, found by name.
	lb0 := between(must(url.Values{"Action": {"CreateLoadBalancer"}, "Name": {"k8s-nlb-00000"}, "Type": {"network"}, "Subnets.member.1": {s.lbs[lbs[1]].subnets[0]}}), "<LoadBalancerArn>", "<")

	if got := all(must(url.Values{"Action": {"DescribeLoadBalancers"}, "Names.member.1": {"k8s-nlb-00000"}}), "<LoadBalancerArn>", "<"); !slices.Equal(got, []string{lb0}) {
		t.Errorf("load balancer k8s-nlb-00000 by name: %v, want %s", got, lb0)
	}
	if code, body := call(s, elbv2Version, url.Values{"Action": {"DescribeLoadBalancers"}, "LoadBalancerArns.member.1": {lbs[0]}}); code != http.StatusBadRequest || !strings.Contains(body, "LoadBalancerNotFound") {
		t.Errorf("deleted load balancer by ARN: %d %s, want LoadBalancerNotFound", code, body)
	}
	if code, body := call(s, elbv2Version, url.Values{"Action": {"DescribeTargetGroups"}, "Names.member.1": {"k8s-nlb-00000"}}); code != http.StatusBadRequest || !strings.Contains(body, "TargetGroupNotFound") {
		t.Errorf("deleted target group by name: %d %s, want TargetGroupNotFound", code, body)
	}
	for _, lb := range append(lbs[1:], lb0) {
		var want, wantListeners []string
		for _, arn := range sortedKeys(s.listeners) {
			if l := s.listeners[arn]; l.lbARN == lb {
				want, wantListeners = append(want, l.tgARN), append(wantListeners, arn)
			}
		}
		slices.Sort(want)
		got := all(must(url.Values{"Action": {"DescribeTargetGroups"}, "LoadBalancerArn": {lb}}), "<TargetGroupArn>", "<")
		if !slices.Equal(got, want) {
			t.Errorf("target groups of %s: %v, want %v", lb, got, want)
		}
		got = all(must(url.Values{"Action": {"DescribeListeners"}, "LoadBalancerArn": {lb}}), "<ListenerArn>", "<")
		if !slices.Equal(got, wantListeners) {
			t.Errorf("listeners of %s: %v, want %v", lb, got, wantListeners)
		}
	}
	for i, tg := range tgs[1:] {
		body := must(url.Values{"Action": {"DescribeTargetGroups"}, "Names.member.1": {s.tgs[tg].name}})
		want := [][]string{nil, {lbs[2]}, {lbs[1]}}[i]
		if got := all(between(body, "<LoadBalancerArns>", "</LoadBalancerArns>"), "<member>", "<"); !slices.Equal(got, want) {
			t.Errorf("target group %s's load balancers: %v, want %v", tg, got, want)
		}
	}
	if got := all(must(url.Values{"Action": {"DescribeTargetGroups"}}), "<TargetGroupArn>", "<"); !slices.Equal(got, sortedKeys(s.tgs)) {
		t.Errorf("every target group: %v, want %v", got, sortedKeys(s.tgs))
	}
	if got := all(must(url.Values{"Action": {"DescribeLoadBalancers"}}), "<LoadBalancerArn>", "<"); !slices.Equal(got, sortedKeys(s.lbs)) {
		t.Errorf("every load balancer: %v, want %v", got, sortedKeys(s.lbs))
	}
}

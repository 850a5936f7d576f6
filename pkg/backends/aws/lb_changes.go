package aws

import (
	"context"
	"fmt"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// existingKey marks a ctx under which the Service's load balancer existed
// when the call began.
type existingKey struct{}

// withExisting marks ctx when lb (the Service's NLB found by observe)
// exists: what mutating calls change under it is reported.
func withExisting(ctx context.Context, lb *elbtypes.LoadBalancer) context.Context {
	if lb == nil {
		return ctx
	}
	return context.WithValue(ctx, existingKey{}, true)
}

// reportChange tells the caller (backends.ReportChange) what a mutating
// call changed on a load balancer that existed before this call; creating
// one from nothing is not a change to report.
func reportChange(ctx context.Context, format string, args ...any) {
	if reportsChanges(ctx) {
		backends.ReportChange(ctx, fmt.Sprintf(format, args...))
	}
}

// reportsChanges reports whether reportChange reports under ctx: a caller
// whose arguments cost as many targets as the NLB has (targetNames) asks
// first, so that creating an NLB formats none of them.
func reportsChanges(ctx context.Context) bool {
	return ctx.Value(existingKey{}) != nil
}

// plural is "<one> <items>" or "<one>s <items>", by the number of items.
func plural(one string, items []string) string {
	if len(items) == 1 {
		return one + " " + items[0]
	}
	return one + "s " + strings.Join(items, ", ")
}

// ruleNames are rules as "tcp/80 from 0.0.0.0/0" ("tcp/80-81 from
// sg-…" for a range), in order.
func ruleNames(rules []rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		ports := fmt.Sprint(r.port)
		if r.to != r.port {
			ports += fmt.Sprintf("-%d", r.to)
		}
		out[i] = fmt.Sprintf("%s/%s from %s", r.protocol, ports, r.source)
	}
	return out
}

// backendRuleNames are rules from the backend's group as "tcp/30080 from
// sg-…", in order.
func backendRuleNames(rules []backendRule, own string) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = fmt.Sprintf("%s/%d from %s", r.protocol, r.port, own)
	}
	return out
}

// targetNames are targets as "i-0abc:30080" or "10.0.1.5:30080".
func targetNames(ts []elbtypes.TargetDescription) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = targetKey(awssdk.ToString(t.Id), awssdk.ToInt32(t.Port))
	}
	return out
}

// tagList is tags as "k=v,k2=v2", sorted by key.
func tagList(m map[string]string) string {
	out := make([]string, 0, len(m))
	for _, k := range sorted(keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return strings.Join(out, ",")
}

// listenerDiff says how a listener differs from what port p asks for.
func listenerDiff(have *elbtypes.Listener, p desiredPort, tgARN string) string {
	var out []string
	if string(have.Protocol) != p.listener {
		out = append(out, fmt.Sprintf("protocol was %s", have.Protocol))
	}
	if forwardsTo(have) != tgARN {
		out = append(out, "forwarding to its target group again")
	}
	if p.listener == "TLS" && (awssdk.ToString(have.SslPolicy) != p.sslPolicy || len(have.Certificates) != 1 || awssdk.ToString(have.Certificates[0].CertificateArn) != p.cert) {
		out = append(out, "certificate "+p.cert+", policy "+p.sslPolicy)
	}
	return strings.Join(out, "; ")
}

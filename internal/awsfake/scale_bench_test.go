package awsfake

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// call sends one Query request to the fake in process and returns the
// status and body.
func call(s *Server, version string, form url.Values) (int, string) {
	form.Set("Version", version)
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDFAKE/20260101/eu-west-1/elasticloadbalancing/aws4_request, SignedHeaders=host, Signature=0")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// between returns the text between the first before and the next after.
func between(body, before, after string) string {
	_, rest, _ := strings.Cut(body, before)
	v, _, _ := strings.Cut(rest, after)
	return v
}

// nlbs is a fake holding n network load balancers as the AWS backend makes
// them (one target group, one listener, tags), and their ARNs.
func nlbs(tb testing.TB, n int) (*Server, []string, []string) {
	tb.Helper()
	s := New("eu-west-1")
	s.Seed(SeedSpec{ClusterID: "bench", Instances: 3})
	vpc, subnet := "", ""
	for _, sn := range s.subnets {
		if subnet == "" || sn.ID < subnet {
			vpc, subnet = sn.VPCID, sn.ID
		}
	}
	var lbARNs, tgARNs []string
	for i := range n {
		name := fmt.Sprintf("k8s-nlb-%05d", i)
		code, body := call(s, elbv2Version, url.Values{"Action": {"CreateLoadBalancer"}, "Name": {name}, "Type": {"network"},
			"Subnets.member.1": {subnet}, "Tags.member.1.Key": {"kubernetes.io/service-name"}, "Tags.member.1.Value": {"default/" + name}})
		if code != http.StatusOK {
			tb.Fatalf("CreateLoadBalancer: %d %s", code, body)
		}
		lb := between(body, "<LoadBalancerArn>", "<")
		code, body = call(s, elbv2Version, url.Values{"Action": {"CreateTargetGroup"}, "Name": {name}, "Protocol": {"TCP"}, "Port": {"30080"}, "VpcId": {vpc}})
		if code != http.StatusOK {
			tb.Fatalf("CreateTargetGroup: %d %s", code, body)
		}
		tg := between(body, "<TargetGroupArn>", "<")
		code, body = call(s, elbv2Version, url.Values{"Action": {"CreateListener"}, "LoadBalancerArn": {lb}, "Protocol": {"TCP"}, "Port": {"80"},
			"DefaultActions.member.1.Type": {"forward"}, "DefaultActions.member.1.TargetGroupArn": {tg}})
		if code != http.StatusOK {
			tb.Fatalf("CreateListener: %d %s", code, body)
		}
		lbARNs, tgARNs = append(lbARNs, lb), append(tgARNs, tg)
	}
	return s, lbARNs, tgARNs
}

// BenchmarkDescribeOneOf5000 is what one Service's sync asks the fake
// (its load balancer by name and by ARN, its listeners, target groups,
// tags and target health) with 100 and with 5,000 network load balancers
// held: the time per call must not grow with what the fake holds.
func BenchmarkDescribeOneOf5000(b *testing.B) {
	for _, n := range []int{100, 5000} {
		s, lbs, tgs := nlbs(b, n)
		lb, tg := lbs[n/2], tgs[n/2]
		calls := map[string]url.Values{
			"LoadBalancersByName": {"Action": {"DescribeLoadBalancers"}, "Names.member.1": {fmt.Sprintf("k8s-nlb-%05d", n/2)}},
			"LoadBalancersByARN":  {"Action": {"DescribeLoadBalancers"}, "LoadBalancerArns.member.1": {lb}},
			"ListenersOfLB":       {"Action": {"DescribeListeners"}, "LoadBalancerArn": {lb}},
			"TargetGroupsOfLB":    {"Action": {"DescribeTargetGroups"}, "LoadBalancerArn": {lb}},
			"TargetGroupsByARN":   {"Action": {"DescribeTargetGroups"}, "TargetGroupArns.member.1": {tg}},
			"Tags":                {"Action": {"DescribeTags"}, "ResourceArns.member.1": {lb}, "ResourceArns.member.2": {tg}},
			"TargetHealth":        {"Action": {"DescribeTargetHealth"}, "TargetGroupArn": {tg}},
		}
		runCalls(b, s, elbv2Version, n, calls)
	}
}

// BenchmarkSecurityGroupsOf5000 is what a Service's security-group steps
// ask the fake (its group by ID, the groups holding a rule from it) with
// 100 and with 5,000 load balancers' groups, each allowed into the nodes'
// group by a rule.
func BenchmarkSecurityGroupsOf5000(b *testing.B) {
	for _, n := range []int{100, 5000} {
		s := New("eu-west-1")
		seeded := s.Seed(SeedSpec{ClusterID: "bench", NodeSecurityGroup: true})
		var ids []string
		for i := range n {
			code, body := call(s, ec2Version, url.Values{"Action": {"CreateSecurityGroup"}, "GroupName": {fmt.Sprintf("k8s-elb-%05d", i)},
				"GroupDescription": {"bench"}, "VpcId": {seeded.VPCID}})
			if code != http.StatusOK {
				b.Fatalf("CreateSecurityGroup: %d %s", code, body)
			}
			id := between(body, "<groupId>", "<")
			code, body = call(s, ec2Version, url.Values{"Action": {"AuthorizeSecurityGroupIngress"}, "GroupId": {seeded.NodeSecurityGroup},
				"IpPermissions.1.IpProtocol": {"tcp"}, "IpPermissions.1.FromPort": {"30080"}, "IpPermissions.1.ToPort": {"30080"},
				"IpPermissions.1.Groups.1.GroupId": {id}})
			if code != http.StatusOK {
				b.Fatalf("AuthorizeSecurityGroupIngress: %d %s", code, body)
			}
			ids = append(ids, id)
		}
		id := ids[n/2]
		calls := map[string]url.Values{
			"ByID":      {"Action": {"DescribeSecurityGroups"}, "GroupId.1": {id}},
			"RulesFrom": {"Action": {"DescribeSecurityGroups"}, "Filter.1.Name": {"ip-permission.group-id"}, "Filter.1.Value.1": {id}},
		}
		runCalls(b, s, ec2Version, n, calls)
	}
}

// runCalls runs each named call as a sub-benchmark, "<name>/<n>".
func runCalls(b *testing.B, s *Server, version string, n int, calls map[string]url.Values) {
	b.Helper()
	for _, name := range sortedKeys(calls) {
		b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
			for b.Loop() {
				form := url.Values{}
				for k, v := range calls[name] {
					form[k] = v
				}
				if code, body := call(s, version, form); code != http.StatusOK {
					b.Fatalf("%s: %d %s", name, code, body)
				}
			}
		})
	}
}

package admission

import (
	"strconv"
	"strings"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// common are values every annotation is tried with: the edge cases.
var common = []string{
	"", " ", "\t", "False", "false", "true", "TRUE", "True", " true ", "yes", "0", "1", "-1", "+5", "0300", "08080",
	"99999999999999999999", "9223372036854775807", "9223372036854775808", "abc", "a b", "a,b", "a,,b", ",", "a,", "*", " * ",
	"x=1,y=2", "x=1, x=2", "=1", "k", "k=", "192.0.2.10", "192.0.2.10,2001:db8::10", " 2001:db8::10 , 192.0.2.10 ",
	"::ffff:192.0.2.1", "::FFFF:c000:201", "0:0:0:0:0:ffff::", "fe80::1%eth0", "::ffff:1.2.3.4%eth0", "0.0.0.0", "::",
	"127.0.0.1", "224.0.0.1", "ff02::1", "169.254.1.1", "fe80::1", "192.0.2.1,192.0.2.2", "2001:db8::1,2001:db8::2",
	"010.0.0.1", "192.0.2.300", "192.0.2.0/24", "a\"b", "a\\b", "tab\there", "ünïcode", "a\u00a0b",
	"/healthz", "/a b", "healthz", "traffic-port", "65535", "65536", "lb.example.com", "LB.example.com", "-lb.example.com",
	"env=production, gpu", "a/b/c=1", "example.com/role=web", "/x", "kubernetes.io/service-name=x", "aws:cloudformation:x=1",
	"kubernetes.io/cluster/c=owned", "team=a,,b=2", "metal", "aws", "metal,aws", "metal,,aws", "metal,metal", "gcp", " metal",
	"metal,gcp", "metal, aws", " , ", "metal,,aws,", "aws,metal,aws", "5m", "90s", "1h30m", "1.5h", ".5s", "1.s", "-5m", "-0", "+0",
	"0s", "5", "5 m", " 5m ", "5µs", "5μs", "2562047h", "2562048h", "99999999999999999999h", "nlb", "NLB", "external", " nlb", "ssl", "SSL", "ſsl", "HTTP", "http ", "internal", "internet-facing",
	"0.0.0.0/0", "t", "v1", "v2", "ROUND_ROBIN", "round_robin", "ipv4", "dualstack", "instance", "ip",
	strings.Repeat("k", 253), strings.Repeat("k", 254), strings.Repeat("a", 256), "/" + strings.Repeat("p", 1024),
}

// Samples are the values the tests try an annotation with: the edge
// cases every annotation gets (empty, white space, "False", "0300",
// invisible characters, mapped and zoned addresses, numbers beyond int64,
// ...) and those its kind's parameters suggest (each value in other
// cases, IDs repeated, the bounds of a range and one past them).
func Samples(s annotation.Spec) []string {
	out := append([]string(nil), common...)
	for _, v := range s.Values {
		out = append(out, v, strings.ToUpper(v), " "+v+" ", v+"=1")
	}
	if s.Format.Pattern != nil {
		x := s.Format.Example
		out = append(out, x, " "+x+" ", x+",", x+","+x, x+", "+x, strings.ToUpper(x), x+"0")
		if strings.HasPrefix(x, "sg-") || strings.HasPrefix(x, "eipalloc-") {
			y := x[:len(x)-1] + "1"
			out = append(out, x+","+y, x+", "+y+" ,bad")
		}
	}
	if s.Kind == annotation.KindInt {
		for _, n := range []int{s.Min - 1, s.Min, s.Min + 1, s.Max} {
			out = append(out, strconv.Itoa(n), " "+strconv.Itoa(n), "0"+strconv.Itoa(n), "+"+strconv.Itoa(n))
		}
		if s.Max < annotation.AnyInt {
			out = append(out, strconv.Itoa(s.Max+1))
		}
	}
	return out
}

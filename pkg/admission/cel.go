// Package admission generates the chart's ValidatingAdmissionPolicies from
// the annotation registry (annotation.Registry): for every annotation a CEL
// check that refuses what its Go reader refuses, with the reader's message,
// and for every annotation whose change replaces something a warning
// naming the consequence. hack/gen-docs writes the result into the chart;
// the tests evaluate the CEL against the Go readers.
package admission

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// lit is a CEL string literal of s.
func lit(s string) string { return strconv.Quote(s) }

// list is a CEL list literal of strings.
func list(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = lit(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// check is the CEL of one annotation's value check: valid is true for a
// good value, message the reader's message for a bad one. Both read the
// value from the expression v.
type check struct {
	valid, message string
}

// gen builds the CEL of one spec.
type gen struct {
	s    annotation.Spec
	v    string // CEL expression of the value
	vid  string // the spec's variable name, the prefix of its others
	vars *[]variable
}

// variable is a policy variable a check defines.
type variable struct{ name, expr string }

// def defines the spec's variable suffix as expr and returns its CEL
// reference.
func (g gen) def(suffix, expr string) string {
	name := g.vid + suffix
	*g.vars = append(*g.vars, variable{name, expr})
	return "variables." + name
}

// cond is a parenthesised CEL conditional.
func cond(c, a, b string) string { return "(" + c + " ? " + a + " : " + b + ")" }

// prefix is the start of the Reader's messages: annotation <name>=<quoted
// value>: .
func (g gen) prefix(v string) string {
	return lit("annotation "+string(g.s.Name)+"=") + " + " + g.quote(v) + " + " + lit(": ")
}

// quote is the string expression x quoted as Go's %q does, but for the
// invisible characters, which Escape escapes in the whole message.
func (g gen) quote(x string) string { return "strings.quote(" + x + ")" }

// invisible are the characters strconv.Quote escapes and CEL's
// strings.quote does not: C0 and C1 controls but the named ones, DEL, and
// the spaces, separators and format characters of the Basic Multilingual
// Plane that people paste by accident.
func invisible() []rune {
	var out []rune
	add := func(lo, hi rune) {
		for r := lo; r <= hi; r++ {
			if !strconv.IsPrint(r) && !strings.ContainsRune("\a\b\f\n\r\t\v", r) {
				out = append(out, r)
			}
		}
	}
	add(0, 0x1f)
	add(0x7f, 0xad)
	add(0x1680, 0x1680)
	add(0x2000, 0x206f)
	add(0x3000, 0x3000)
	add(0xfeff, 0xfeff)
	return out
}

// Escape is the message expression x with the invisible characters Go's
// %q escapes and CEL's strings.quote does not escaped as Go does (the rest
// of the message, text of ours, has none).
func Escape(x string) string {
	var b strings.Builder
	b.WriteString("(" + x + ")")
	class := ""
	for _, r := range invisible() {
		esc := strconv.QuoteRune(r)
		b.WriteString(".replace(" + lit(string(r)) + ", " + lit(esc[1:len(esc)-1]) + ")")
		class += fmt.Sprintf("\\x{%x}", r)
	}
	return cond("("+x+").matches("+lit("["+class+"]")+")", b.String(), x)
}

// msg is prefix(v) followed by a literal text.
func (g gen) msg(v, want string) string { return g.prefix(v) + " + " + lit(want) }

// quotedValue is the value a message quotes (as written, or trimmed).
func (g gen) quotedValue() string {
	if g.s.Trimmed {
		return g.t()
	}
	return g.v
}

// t is the trimmed value.
func (g gen) t() string { return g.v + ".trim()" }

// entries is the value split at commas, each trimmed.
func (g gen) entries() string { return "variables." + g.vid + "_entries" }

// defEntries defines entries.
func (g gen) defEntries() string {
	return g.def("_entries", g.v+".split(',').map(e, e.trim())")
}

// firstIndex is the index of the first entry of the list expression l for
// which the predicate over i (index) and e (entry) holds.
func firstIndex(l, pred string) string {
	return l + ".transformList(i, e, " + pred + ").indexOf(true)"
}

// celCheck returns the CEL of spec s, the variables it needs (the value
// as id, then any of its own, named id_...), or false when it has none.
// value is the CEL of the value (evaluated only when the annotation is
// set).
func celCheck(s annotation.Spec, id, value string) (check, []variable, bool) {
	f, ok := kinds[s.Kind]
	if !ok {
		return check{}, nil, false
	}
	vars := []variable{{id, value}}
	g := gen{s: s, v: "variables." + id, vid: id, vars: &vars}
	c := f(g)
	if s.KubeVIPMark != "" {
		c = g.kubeVIP(c)
	}
	if s.HTTPHealthCheckOnly {
		c.valid = "!" + httpHealthCheck() + " || (" + c.valid + ")"
	}
	return c, vars, true
}

var kinds = map[annotation.Kind]func(gen) check{
	annotation.KindBackends:        gen.backends,
	annotation.KindString:          gen.str,
	annotation.KindBool:            gen.boolean,
	annotation.KindAWSInternal:     gen.awsInternal,
	annotation.KindInt:             gen.integer,
	annotation.KindEnum:            gen.enum,
	annotation.KindEnumFold:        gen.enumFold,
	annotation.KindList:            gen.list,
	annotation.KindListOrStar:      gen.listOrStar,
	annotation.KindUpstreamList:    gen.upstreamList,
	annotation.KindMap:             gen.kvMap,
	annotation.KindPairs:           gen.pairs,
	annotation.KindID:              gen.id,
	annotation.KindIDs:             gen.ids,
	annotation.KindLoadBalancerIPs: gen.loadBalancerIPs,
	annotation.KindIPList:          gen.ipList,
	annotation.KindIPv4s:           gen.ipv4s,
	annotation.KindSharingKey:      gen.sharingKey,
	annotation.KindPort:            gen.port,
	annotation.KindHTTPPath:        gen.httpPath,
	annotation.KindStar:            gen.star,
	annotation.KindDNSName:         gen.dnsName,
	annotation.KindLabelSelector:   gen.labelSelector,
	annotation.KindDuration:        gen.duration,
}

const emptyString = "must not be empty; set a value or remove the annotation"

func (g gen) str() check {
	valid := g.t() + " != ''"
	if g.s.MaxLen == 0 {
		return check{valid: valid, message: g.msg(g.v, emptyString)}
	}
	return check{
		valid:   fmt.Sprintf("%s && bytes(%s).size() <= %d", valid, g.t(), g.s.MaxLen),
		message: cond(g.t()+" == ''", g.msg(g.v, emptyString), g.msg(g.quotedValue(), g.s.Want)),
	}
}

func (g gen) boolean() check {
	return check{valid: g.t() + " in ['true', 'false']", message: g.msg(g.v, `must be "true" or "false"`)}
}

func (g gen) awsInternal() check {
	return check{
		valid:   g.t() + " in ['false', '', '0.0.0.0/0', '1', 't', 'T', 'TRUE', 'true', 'True']",
		message: g.msg(g.t(), `must be "true" or "false" (lower case: the upstream provider makes the load balancer internal for any value but "false")`),
	}
}

// number is true when the string expression s is a whole number Go's
// strconv.Atoi reads within [lo, hi] (not except).
func number(s string, lo, hi int, except *int) string {
	small := fmt.Sprintf("(%s.matches('^[+-]?0*[0-9]{1,18}$') && int(%s) >= %d && int(%s) <= %d", s, s, lo, s, hi)
	if except != nil {
		small += fmt.Sprintf(" && int(%s) != %d", s, *except)
	}
	small += ")"
	if hi != annotation.AnyInt {
		return small
	}
	// Up to the largest int64, which has 19 digits: compare them as text.
	return fmt.Sprintf("(%s || (%s.matches('^[+]?0*[1-9][0-9]{18}$') && %s.find('[1-9][0-9]{18}$') <= '9223372036854775807'))", small, s, s)
}

func (g gen) integer() check {
	var except *int
	if g.s.ExceptSet {
		except = &g.s.Except
	}
	want := g.s.Want
	if want == "" {
		want = fmt.Sprintf("must be a whole number from %d to %d", g.s.Min, g.s.Max)
	}
	return check{valid: number(g.t(), g.s.Min, g.s.Max, except), message: g.msg(g.v, want)}
}

func (g gen) want() string {
	if g.s.Want != "" {
		return g.s.Want
	}
	return "must be one of " + strings.Join(g.s.Values, ", ")
}

func (g gen) enum() check {
	if g.s.Exact {
		return check{valid: g.v + " in " + list(g.s.Values), message: g.msg(g.v, g.want())}
	}
	return check{valid: g.t() + " in " + list(g.s.Values), message: g.msg(g.quotedValue(), g.want())}
}

func (g gen) enumFold() check {
	lower := make([]string, len(g.s.Values))
	for i, v := range g.s.Values {
		lower[i] = strings.ToLower(v)
	}
	// strings.EqualFold also folds the long s and the Kelvin sign.
	folded := g.t() + ".replace('\u017f', 's').replace('\u212a', 'k').lowerAscii()"
	return check{valid: folded + " in " + list(lower), message: g.msg(g.v, g.want())}
}

// listCheck is Reader.List: not blank, no empty entry. It defines the
// entries.
func (g gen) listCheck() check {
	e := g.defEntries()
	return check{
		valid: fmt.Sprintf("%s != '' && !%s.exists(e, e == '')", g.t(), e),
		message: cond(g.t()+" == ''", g.msg(g.v, "must not be empty; give a comma-separated list or remove the annotation"),
			fmt.Sprintf("%s + 'entry ' + string(%s.indexOf('') + 1) + ' is empty; separate entries with a single comma'", g.prefix(g.v), e)),
	}
}

func (g gen) list() check { return g.listCheck() }

func (g gen) upstreamList() check {
	return check{valid: g.v + ".split(',').exists(e, e.trim() != '')", message: g.msg(g.v, g.s.Want)}
}

func (g gen) listOrStar() check {
	l := g.listCheck()
	return check{valid: g.t() + " == '*' || (" + l.valid + ")", message: l.message}
}

// and combines a list check with an entry check that may assume the list
// is well-formed: the entry check's message is used only when the list
// passes.
func and(l, c check) check {
	return check{valid: "(" + l.valid + ") && (" + c.valid + ")", message: cond(l.valid, c.message, l.message)}
}

// first defines the index of the first entry of l for which pred (over i
// and e) holds, -1 for none, and returns it with that entry.
func (g gen) first(l, pred string) (idx, at string) {
	idx = g.def("_bad", firstIndex(l, pred))
	return idx, cond(idx+" >= 0", l+"["+idx+"]", "''")
}

func (g gen) kvMap() check {
	l := g.listCheck()
	e := g.entries()
	keys := g.def("_keys", e+".map(x, x.split('=')[0].trim())")
	idx, at := g.first(e, fmt.Sprintf("!e.contains('=') || %s[i] == '' || %s.indexOf(%s[i]) < i", keys, keys, keys))
	atKey := cond(idx+" >= 0", keys+"["+idx+"]", "''")
	return and(l, check{
		valid: idx + " < 0",
		message: cond(fmt.Sprintf("!%s.contains('=') || %s == ''", at, atKey),
			fmt.Sprintf("%s + 'entry ' + %s + ' is not key=value; write e.g. key1=value1,key2=value2'", g.prefix(g.v), g.quote(at)),
			fmt.Sprintf("%s + 'key ' + %s + ' is given twice'", g.prefix(g.v), g.quote(atKey))),
	})
}

func (g gen) pairs() check {
	key := "e.split('=')[0].trim()"
	reserved := "false"
	if len(g.s.Values) > 0 {
		reserved = key + " in " + list(g.s.Values)
	}
	for _, p := range g.s.Prefixes {
		reserved += " || " + key + ".startsWith(" + lit(p) + ")"
	}
	raw := g.def("_raw", g.v+".split(',')")
	idx, at := g.first(raw, fmt.Sprintf("e.trim() != '' && (%s == '' || %s)", key, reserved))
	atKey := at + ".split('=')[0].trim()"
	return check{
		valid: idx + " < 0",
		message: cond(atKey+" == ''",
			fmt.Sprintf("%s + 'entry ' + %s + ' has no key; write e.g. key1=value1,key2'", g.prefix(g.v), g.quote(at)),
			fmt.Sprintf("%s + 'tag ' + %s + \" is the backend's own (or AWS's); choose another key\"", g.prefix(g.v), g.quote(atKey))),
	}
}

// formatWant is IDFormat's "must be an ID like ..." text.
func formatWant(f annotation.IDFormat) string {
	s := "must be an ID like " + f.Example
	if f.Hint != "" {
		s += "; find it with " + f.Hint
	}
	return s
}

func (g gen) id() check {
	return check{
		valid:   fmt.Sprintf("%s != '' && %s.matches(%s)", g.t(), g.t(), lit(g.s.Format.Pattern.String())),
		message: cond(g.t()+" == ''", g.msg(g.v, emptyString), g.msg(g.v, formatWant(g.s.Format))),
	}
}

func (g gen) ids() check {
	l := g.listCheck()
	re := lit(g.s.Format.Pattern.String())
	e := g.entries()
	idx, at := g.first(e, fmt.Sprintf("!e.matches(%s) || %s.indexOf(e) < i", re, e))
	return and(l, check{
		valid: idx + " < 0",
		message: cond(fmt.Sprintf("!%s.matches(%s)", at, re),
			fmt.Sprintf("%s + 'entry ' + %s + %s", g.prefix(g.v), g.quote(at), lit(": "+formatWant(g.s.Format))),
			fmt.Sprintf("%s + %s + ' is listed twice'", g.prefix(g.v), at)),
	})
}

// mapped is true when the string expression e is an IPv4-mapped IPv6
// address without a zone (which isIP refuses): with its ffff group made
// fffe it is an IPv6 address.
func mapped(e string) string {
	return fmt.Sprintf("(!isIP(%s) && isIP(%s.lowerAscii().replace(':ffff:', ':fffe:', 1)))", e, e)
}

// unmapped is the IPv4 address an IPv4-mapped IPv6 address e maps, in
// dotted form: the last two groups of the canonical form of its fffe twin
// (::fffe:X:Y), read as hex.
func (g gen) unmapped(e string) string {
	twin := g.def("_twin", fmt.Sprintf("%s ? string(ip(%s.lowerAscii().replace(':ffff:', ':fffe:', 1))).split(':') : ['0', '0']", mapped(e), e))
	hex := func(k int) string {
		grp := fmt.Sprintf("%s[%s.size() - %d]", twin, twin, k)
		pad := fmt.Sprintf("('000' + %s).substring(%s.size() - 1)", grp, grp)
		var terms []string
		for k, w := range []int{4096, 256, 16, 1} {
			terms = append(terms, fmt.Sprintf("%d * '0123456789abcdef'.indexOf(%s.charAt(%d))", w, pad, k))
		}
		return g.def(fmt.Sprintf("_hex%d", k), strings.Join(terms, " + "))
	}
	hi, lo := hex(2), hex(1)
	return fmt.Sprintf("string(%s / 256) + '.' + string(%s %% 256) + '.' + string(%s / 256) + '.' + string(%s %% 256)", hi, hi, lo, lo)
}

// zoned is true when e is an IPv6 address (or a mapped one) with a zone.
func zoned(e string) string {
	before := fmt.Sprintf("%s.substring(0, %s.indexOf('%%'))", e, e)
	return fmt.Sprintf("(%s.indexOf('%%') > 0 && %s.indexOf('%%') < %s.size() - 1 && ((isIP(%s) && ip(%s).family() == 6) || %s))", e, e, e, before, before, mapped(before))
}

// special is true when the address e cannot be a load-balancer address
// (netip's IsUnspecified, IsLoopback, IsMulticast, IsLinkLocalUnicast).
func special(e string) string {
	return fmt.Sprintf("(ip(%s).isUnspecified() || ip(%s).isLoopback() || ip(%s).isLinkLocalUnicast() || cidr('224.0.0.0/4').containsIP(%s) || cidr('ff00::/8').containsIP(%s))", e, e, e, e, e)
}

func familyName(e string) string {
	return fmt.Sprintf("(ip(%s).family() == 4 ? 'IPv4' : 'IPv6')", e)
}

// ipBad is ParseLoadBalancerIPs' entry check.
func ipBad(e string) string {
	return fmt.Sprintf("(%s == '' || !isIP(%s) || %s)", e, e, special(e))
}

// ipWhy is the message of an entry ipBad refuses.
func (g gen) ipWhy(e string) string {
	return cond(e+" == ''", "'empty entry: separate addresses with a single comma'",
		cond(zoned(e), g.quote(e)+" + ' has a zone; write the address without %zone'",
			cond(mapped(e), g.quote(e)+" + ' is an IPv4-mapped IPv6 address; write it as ' + "+g.unmapped(e),
				cond("!isIP("+e+")", g.quote(e)+" + ' is not an IP address'",
					"string(ip("+e+")) + ' cannot be a load-balancer address (unspecified, loopback, multicast or link-local)'"))))
}

// sameFamilyBefore is true when an entry before index i of l is a good
// address of e's family.
func sameFamilyBefore(l, e string, bad func(string) string) string {
	return fmt.Sprintf("%s.exists(j, f, j < i && !%s && ip(f).family() == ip(%s).family())", l, bad("f"), e)
}

// familyClash is the message of two addresses of one family: the earlier
// good one of at's family, then at.
func familyClash(l, at string, bad func(string) string) string {
	prev := l + ".filter(f, !" + bad("f") + " && ip(f).family() == ip(" + at + ").family())[0]"
	return fmt.Sprintf("string(ip(%s)) + ' and ' + string(ip(%s)) + ' are both ' + %s + '; give at most one address per IP family'", prev, at, familyName(at))
}

func (g gen) loadBalancerIPs() check {
	l := g.defEntries()
	idx, at := g.first(l, ipBad("e")+" || "+sameFamilyBefore(l, "e", ipBad))
	name := string(g.s.Name)
	head := lit("annotation "+name+"=") + " + " + g.quote(g.v)
	return check{
		valid: g.t() + " != '' && " + idx + " < 0",
		message: cond(g.t()+" == ''", lit("annotation "+name+" is empty: write one address per IP family, e.g. 192.0.2.10 or 192.0.2.10,2001:db8::10, or remove the annotation"),
			cond(ipBad(at), head+" + ', entry ' + string("+idx+" + 1) + ': ' + "+g.ipWhy(at),
				head+" + ': ' + "+familyClash(l, at, ipBad))),
	}
}

func (g gen) ipList() check {
	l := g.defEntries()
	notIP := func(e string) string { return "!isIP(" + e + ")" }
	bad := notIP
	if g.s.Hostnames {
		bad = func(e string) string { return "(!isIP(" + e + ") && !" + subdomain(e) + ")" }
	}
	idx, at := g.first(l, bad("e")+" || (isIP(e) && "+sameFamilyBefore(l, "e", notIP)+")")
	return check{
		valid: g.t() + " == '' || " + idx + " < 0",
		message: cond(bad(at),
			fmt.Sprintf("%s + 'entry ' + string(%s + 1) + ': ' + %s + ' is not an IP address'", g.prefix(g.v), idx, g.quote(at)),
			g.prefix(g.v)+" + "+familyClash(l, at, notIP)),
	}
}

func (g gen) ipv4s() check {
	l := g.listCheck()
	good := "((isIP(e) && ip(e).family() == 4) || " + mapped("e") + ")"
	idx, at := g.first(g.entries(), "!"+good)
	return and(l, check{
		valid:   idx + " < 0",
		message: fmt.Sprintf("%s + %s + ' is not an IPv4 address'", g.prefix(g.v), g.quote(at)),
	})
}

func (g gen) sharingKey() check {
	name := string(g.s.Name)
	nonPrint := lit(`[^\p{L}\p{M}\p{N}\p{P}\p{S}]`)
	max := annotation.MaxAllowSharedIPLength
	return check{
		valid: fmt.Sprintf("%s != '' && bytes(%s).size() <= %d && !%s.matches(%s)", g.t(), g.t(), max, g.t(), nonPrint),
		message: cond(g.t()+" == ''", lit("annotation "+name+" is empty: set it to a key shared by the Services that may share an address, e.g. web, or remove it"),
			cond(fmt.Sprintf("bytes(%s).size() > %d", g.t(), max),
				fmt.Sprintf("%s + string(bytes(%s).size()) + %s", lit("annotation "+name+" is "), g.t(), lit(fmt.Sprintf(" bytes long; use a key of at most %d", max))),
				fmt.Sprintf("%s + %s + ' contains white space or a non-printable character; use letters, digits and punctuation only'", lit("annotation "+name+"="), g.quote(g.t())))),
	}
}

func (g gen) port() check {
	return check{
		valid:   fmt.Sprintf("%s == 'traffic-port' || %s", g.t(), number(g.t(), 1, 65535, nil)),
		message: g.msg(g.v, "must be traffic-port or a port number from 1 to 65535"),
	}
}

// httpHealthCheck is annotation.HTTPHealthCheck of the Service.
func httpHealthCheck() string { return httpHealthCheckOf("variables.anns", "object") }

// httpHealthCheckOf is annotation.HTTPHealthCheck of the Service obj with
// the annotations anns (CEL expressions).
func httpHealthCheckOf(anns, obj string) string {
	p := lit(string(annotation.AWSHealthCheckProtocol))
	folded := anns + "[" + p + "].trim().replace('\u017f', 's').replace('\u212a', 'k').lowerAscii()"
	return fmt.Sprintf("(%s in %s && %s in ['tcp', 'http', 'https'] ? %s != 'tcp' : (has(%s.spec.externalTrafficPolicy) && %s.spec.externalTrafficPolicy == 'Local'))", p, anns, folded, folded, obj, obj)
}

func (g gen) httpPath() check {
	return check{
		valid:   fmt.Sprintf("%s.startsWith('/') && bytes(%s).size() <= %d && !%s.matches('[ \\t\\n]')", g.v, g.v, g.s.MaxLen, g.v),
		message: g.msg(g.v, fmt.Sprintf("must be a path starting with / of at most %d characters, without white space", g.s.MaxLen)),
	}
}

func (g gen) star() check {
	return check{valid: g.v + " == '*'", message: g.msg(g.v, `must be "*" (proxy protocol v2 on every port)`)}
}

// dns1123Subdomain is validation.IsDNS1123Subdomain's pattern.
const dns1123Subdomain = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`

// labelName is the name part of a qualified name and a label value.
const labelName = `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`

func subdomain(s string) string {
	return fmt.Sprintf("(bytes(%s).size() <= 253 && %s.matches(%s))", s, s, lit(dns1123Subdomain))
}

func (g gen) dnsName() check {
	return check{
		valid:   g.t() + " != '' && " + subdomain(g.t()),
		message: cond(g.t()+" == ''", g.msg(g.v, emptyString), g.msg(g.t(), "must be a DNS name such as lb.example.com")),
	}
}

// qualifiedName is validation.IsQualifiedName of the string expression k.
func qualifiedName(k string) string {
	parts := k + ".split('/')"
	name := func(n string) string {
		return fmt.Sprintf("(bytes(%s).size() <= 63 && %s.matches(%s))", n, n, lit(labelName))
	}
	return fmt.Sprintf("((%s.size() == 1 && %s) || (%s.size() == 2 && %s[0] != '' && %s && %s))",
		parts, name(k), parts, parts, subdomain(parts+"[0]"), name(parts+"[1]"))
}

func (g gen) labelSelector() check {
	l := g.listCheck()
	key := "e.split('=')[0].trim()"
	value := "(e.contains('=') ? e.substring(e.indexOf('=') + 1).trim() : '')"
	labelValue := fmt.Sprintf("(%s == '' || (bytes(%s).size() <= 63 && %s.matches(%s)))", value, value, value, lit(labelName))
	idx, at := g.first(g.entries(), fmt.Sprintf("!%s || !%s", qualifiedName(key), labelValue))
	return and(l, check{
		valid:   idx + " < 0",
		message: fmt.Sprintf("%s + 'entry ' + %s + ' is not a label key or key=value; write e.g. env=production, gpu'", g.prefix(g.v), g.quote(at)),
	})
}

// backends is ParseLoadBalancerBackends against variables.backends (empty:
// names not checked; the chart lists them sorted, as the message has them).
func (g gen) backends() check {
	known := "variables.backends"
	names := g.def("_names", fmt.Sprintf("%s.split(',').map(e, e.trim()).filter(e, e != '').size() > 0 ? %s.split(',').map(e, e.trim()).filter(e, e != '') : [%s]", g.v, g.v, g.v))
	unknown := func(n string) string {
		return fmt.Sprintf("(%s.trim() == '' || (%s.size() > 0 && !(%s in %s)))", n, known, n, known)
	}
	idx, at := g.first(names, fmt.Sprintf("%s || %s.indexOf(e) < i", unknown("e"), names))
	head := lit("annotation "+string(g.s.Name)+"=") + " + " + g.quote(g.v)
	return check{
		valid: idx + " < 0",
		message: cond(unknown(at),
			fmt.Sprintf("%s + ' names no backend with load balancers' + %s + '; use one of [' + %s.join(' ') + '] (or several, comma-separated), or remove the annotation to use the default'", head, cond(names+".size() > 1", "' (' + "+g.quote(at)+" + ')'", "''"), known),
			fmt.Sprintf("%s + ' names backend ' + %s + ' twice; name each backend once'", head, g.quote(at))),
	}
}

// goDuration is time.ParseDuration's syntax.
const goDuration = `^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// duration is ParseLoadBalancerDrain (and the router's reading): a
// negative duration is refused unless it rounds to 0 (time.ParseDuration
// drops what is below a nanosecond: -0.1ns is 0, a drain of 0). A duration
// beyond int64 nanoseconds (about 292 years), which Go refuses, is an
// evaluation error of CEL's duration(): refused too, by the policy's
// failurePolicy Fail, with the API server's message.
func (g gen) duration() check {
	abs := fmt.Sprintf("duration(%s.replace('+', '').replace('-', ''))", g.t())
	return check{
		valid:   fmt.Sprintf("%s.matches(%s) && (!%s.startsWith('-') || %s == duration('0s')) && %s >= duration('0s')", g.t(), lit(goDuration), g.t(), abs, abs),
		message: fmt.Sprintf("%s + %s + ' is not a drain period: write a duration such as 5m or 90s, or 0 to delete a load balancer the Service stops using at once'", lit("annotation "+string(g.s.Name)+"="), g.quote(g.v)),
	}
}

// kubeVIPRequest is annotation.Spec.KubeVIPRequest of the Service with the
// annotations anns (a CEL map): a bare-metal backend announces through
// kube-vip (the parameter) and the Service does not carry the mark of a
// value the backend wrote.
func kubeVIPRequest(s annotation.Spec, anns string) string {
	m := lit(string(s.KubeVIPMark))
	return fmt.Sprintf("(variables.kubeVIP && !(%s in %s && %s[%s] == 'true'))", m, anns, anns, m)
}

// kubeVIP is annotation.Spec.CheckIn of a Spec.KubeVIPMark annotation:
// the bare-metal backend's reading of its request (kubeVIPIPs) where the
// value is one, else the kind's (asKind). It defines the request flag
// (_req) and the request check's variables (_kv...).
func (g gen) kubeVIP(asKind check) check {
	req := g.def("_req", kubeVIPRequest(g.s, "variables.anns"))
	kv := gen{s: g.s, v: g.v, vid: g.vid + "_kv", vars: g.vars}.kubeVIPIPs()
	return check{valid: cond(req, kv.valid, asKind.valid), message: cond(req, kv.message, asKind.message)}
}

// kubeVIPIPs is annotation.ParseKubeVIPIPs: one usable address per IP
// family, none empty, no name, not unspecified (kube-vip's DHCP).
func (g gen) kubeVIPIPs() check {
	l := g.defEntries()
	idx, at := g.first(l, ipBad("e")+" || "+sameFamilyBefore(l, "e", ipBad))
	name := string(g.s.Name)
	head := lit("annotation "+name+"=") + " + " + g.quote(g.v) + " + ': '"
	fix := lit("; under announce: kube-vip the backend serves it as a request of pool addresses: write one address per IP family of the Service, e.g. 192.0.2.10 or 192.0.2.10,2001:db8::10, or remove the annotation to have one assigned")
	prev := l + ".filter(f, !" + ipBad("f") + " && ip(f).family() == ip(" + at + ").family())[0]"
	clash := fmt.Sprintf("string(ip(%s)) + ' and ' + string(ip(%s)) + ' are both ' + %s + '; the backend gives one address per IP family'", prev, at, familyName(at))
	return check{
		valid: g.t() + " != '' && " + idx + " < 0",
		message: head + " + " + cond(g.t()+" == ''", "'the value is empty (kube-vip then announces nothing)'",
			cond(ipBad(at), "'entry ' + string("+idx+" + 1) + ': ' + "+g.kubeVIPWhy(at), clash)) + " + " + fix,
	}
}

// kubeVIPWhy is the message of an entry e of a kube-vip request that
// ipBad refuses, in parseKubeVIPIP's order.
func (g gen) kubeVIPWhy(e string) string {
	before := fmt.Sprintf("%s.substring(0, %s.indexOf('%%'))", e, e)
	plain := g.def("_plain", cond(zoned(e), before, e))
	fix := cond(mapped(plain), g.unmapped(plain), "string(ip("+plain+"))")
	return cond(e+" == ''", "'empty entry; separate addresses with a single comma'",
		cond("!isIP("+e+") && !"+zoned(e)+" && !"+mapped(e), g.quote(e)+" + ' is not an IP address (kube-vip would resolve it as a hostname)'",
			cond("isIP("+e+") && ip("+e+").isUnspecified()", "string(ip("+e+")) + ' asks kube-vip for an address by DHCP, which the backend does not serve'",
				cond("!isIP("+e+")", g.quote(e)+" + ' is not a plain IP address; write ' + "+fix,
					"string(ip("+e+")) + ' cannot be a load-balancer address (loopback, multicast or link-local)'"))))
}

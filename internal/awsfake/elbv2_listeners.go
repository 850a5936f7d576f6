package awsfake

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

type xmlAction struct {
	Type           string `xml:"Type"`
	TargetGroupArn string `xml:"TargetGroupArn"`
}

type xmlListener struct {
	ListenerArn     string           `xml:"ListenerArn"`
	LoadBalancerArn string           `xml:"LoadBalancerArn"`
	Port            int              `xml:"Port"`
	Protocol        string           `xml:"Protocol"`
	DefaultActions  []xmlAction      `xml:"DefaultActions>member"`
	Certificates    []xmlCertificate `xml:"Certificates>member,omitempty"`
	SslPolicy       string           `xml:"SslPolicy,omitempty"`
}

type xmlCertificate struct {
	CertificateArn string `xml:"CertificateArn"`
}

type listenersResult struct {
	Listeners  []xmlListener `xml:"Listeners>member"`
	NextMarker string        `xml:"NextMarker,omitempty"`
}

func (l *listener) xml() xmlListener {
	x := xmlListener{ListenerArn: l.arn, LoadBalancerArn: l.lbARN, Port: l.port, Protocol: l.protocol,
		DefaultActions: []xmlAction{{Type: "forward", TargetGroupArn: l.tgARN}}, SslPolicy: l.sslPolicy}
	if l.cert != "" {
		x.Certificates = []xmlCertificate{{CertificateArn: l.cert}}
	}
	return x
}

// readListener reads Port, Protocol and a single forward default action.
func (s *Server) readListener(f url.Values, base listener) (listener, *Error) {
	l := base
	if v := f.Get("Port"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return l, errorf("ValidationError", "Port must be 1 to 65535")
		}
		l.port = n
	}
	if v := f.Get("Protocol"); v != "" {
		l.protocol = v
	}
	if acts := items(f, "DefaultActions.member"); len(acts) > 0 {
		if len(acts) != 1 || f.Get(acts[0]+".Type") != "forward" {
			return l, errorf("ValidationError", "this fake supports exactly one forward default action")
		}
		l.tgARN = f.Get(acts[0] + ".TargetGroupArn")
	}
	if err := s.readTLS(f, &l); err != nil {
		return l, err
	}
	tg, err := s.targetGroup(l.tgARN)
	if err != nil {
		return l, err
	}
	// A TLS listener forwards to TCP or TLS groups; the others to their
	// own protocol.
	if tg.protocol != l.protocol && (l.protocol != "TLS" || tg.protocol != "TCP") {
		return l, errorf("ValidationError", "The listener protocol '%s' must match the target group protocol '%s'", l.protocol, tg.protocol)
	}
	if lb := s.lbs[l.lbARN]; tg.ipAddressType == "ipv6" && lb != nil && lb.ipAddressType != "dualstack" {
		return l, errorf("ValidationError", "You cannot associate an IPv6 target group with a load balancer that has an '%s' IP address type", lb.ipAddressType)
	}
	if other := s.lbOf(tg.arn); other != "" && other != l.lbARN {
		return l, errorf("TargetGroupAssociationLimit", "The target group '%s' is already associated with a different load balancer", tg.name)
	}
	return l, nil
}

// createListener adds a listener; the same settings again return the
// existing one, as in AWS. Network load balancers take one listener per port.
func (s *Server) createListener(f url.Values) (any, *Error) {
	lb, found := s.lbs[f.Get("LoadBalancerArn")]
	if !found {
		return nil, &Error{Status: 400, Code: "LoadBalancerNotFound", Message: fmt.Sprintf("Load balancer '%s' not found", f.Get("LoadBalancerArn"))}
	}
	l, err := s.readListener(f, listener{lbARN: lb.arn})
	if err != nil {
		return nil, err
	}
	for _, o := range s.listenersOfLB(lb.arn) {
		if o.port == l.port {
			if o.protocol == l.protocol && o.tgARN == l.tgARN && o.cert == l.cert && o.sslPolicy == l.sslPolicy {
				return elbResult("CreateListener", listenersResult{Listeners: []xmlListener{o.xml()}}), nil
			}
			return nil, errorf("DuplicateListener", "A listener already exists on port %d of this load balancer", l.port)
		}
	}
	l.arn = strings.Replace(lb.arn, ":loadbalancer/", ":listener/", 1) + "/" + s.nextID()[1:]
	l.tags = elbTagsFrom(f)
	s.putListener(&l)
	return elbResult("CreateListener", listenersResult{Listeners: []xmlListener{l.xml()}}), nil
}

func (s *Server) describeListeners(f url.Values) (any, *Error) {
	lbARN, arns := f.Get("LoadBalancerArn"), list(f, "ListenerArns.member")
	if lbARN != "" && s.lbs[lbARN] == nil {
		return nil, &Error{Status: 400, Code: "LoadBalancerNotFound", Message: fmt.Sprintf("Load balancer '%s' not found", lbARN)}
	}
	if lbARN == "" && len(arns) == 0 {
		return nil, errorf("ValidationError", "You must specify either listener ARNs or a load balancer ARN")
	}
	var matched []*listener
	for _, arn := range s.listenerCandidates(lbARN, arns) {
		l := s.listeners[arn]
		if (lbARN == "" || l.lbARN == lbARN) && (len(arns) == 0 || contains(arns, l.arn)) {
			matched = append(matched, l)
		}
	}
	if len(arns) > 0 && len(matched) < len(arns) {
		return nil, &Error{Status: 400, Code: "ListenerNotFound", Message: "One or more listeners not found"}
	}
	size, err := pageSize(f)
	if err != nil {
		return nil, err
	}
	page, next, err := paginate(len(matched), f.Get("Marker"), size)
	if err != nil {
		return nil, err
	}
	res := listenersResult{NextMarker: next}
	for _, l := range matched[page[0]:page[1]] {
		res.Listeners = append(res.Listeners, l.xml())
	}
	return elbResult("DescribeListeners", res), nil
}

func (s *Server) listener(arn string) (*listener, *Error) {
	l, found := s.listeners[arn]
	if !found {
		return nil, &Error{Status: 400, Code: "ListenerNotFound", Message: fmt.Sprintf("Listener '%s' not found", arn)}
	}
	return l, nil
}

func (s *Server) modifyListener(f url.Values) (any, *Error) {
	l, err := s.listener(f.Get("ListenerArn"))
	if err != nil {
		return nil, err
	}
	nl, err := s.readListener(f, *l)
	if err != nil {
		return nil, err
	}
	s.putListener(&nl)
	return elbResult("ModifyListener", listenersResult{Listeners: []xmlListener{nl.xml()}}), nil
}

func (s *Server) deleteListener(f url.Values) (any, *Error) {
	l, err := s.listener(f.Get("ListenerArn"))
	if err != nil {
		return nil, err
	}
	s.dropListener(l)
	return elbResult("DeleteListener", nil), nil
}

// tagsOf returns the tag map of an ELBv2 resource.
func (s *Server) tagsOf(arn string) (map[string]string, *Error) {
	switch {
	case s.lbs[arn] != nil:
		return s.lbs[arn].tags, nil
	case s.tgs[arn] != nil:
		return s.tgs[arn].tags, nil
	case s.listeners[arn] != nil:
		return s.listeners[arn].tags, nil
	case strings.Contains(arn, ":targetgroup/"):
		return nil, &Error{Status: 400, Code: "TargetGroupNotFound", Message: fmt.Sprintf("Target group '%s' not found", arn)}
	case strings.Contains(arn, ":listener/"):
		return nil, &Error{Status: 400, Code: "ListenerNotFound", Message: fmt.Sprintf("Listener '%s' not found", arn)}
	}
	return nil, &Error{Status: 400, Code: "LoadBalancerNotFound", Message: fmt.Sprintf("Load balancer '%s' not found", arn)}
}

func (s *Server) addTags(f url.Values) (any, *Error) {
	tags := elbTagsFrom(f)
	for _, arn := range list(f, "ResourceArns.member") {
		m, err := s.tagsOf(arn)
		if err != nil {
			return nil, err
		}
		for k, v := range tags {
			m[k] = v
		}
	}
	return elbResult("AddTags", nil), nil
}

func (s *Server) removeTags(f url.Values) (any, *Error) {
	keys := list(f, "TagKeys.member")
	for _, arn := range list(f, "ResourceArns.member") {
		m, err := s.tagsOf(arn)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			delete(m, k)
		}
	}
	return elbResult("RemoveTags", nil), nil
}

type xmlTagDescription struct {
	ResourceArn string      `xml:"ResourceArn"`
	Tags        []memberTag `xml:"Tags>member"`
}

type tagsResult struct {
	TagDescriptions []xmlTagDescription `xml:"TagDescriptions>member"`
}

// describeTags answers for up to 20 resources, as AWS does.
func (s *Server) describeTags(f url.Values) (any, *Error) {
	arns := list(f, "ResourceArns.member")
	if len(arns) == 0 || len(arns) > 20 {
		return nil, errorf("ValidationError", "ResourceArns must list 1 to 20 ARNs")
	}
	var res tagsResult
	for _, arn := range arns {
		m, err := s.tagsOf(arn)
		if err != nil {
			return nil, err
		}
		res.TagDescriptions = append(res.TagDescriptions, xmlTagDescription{ResourceArn: arn, Tags: elbTags(m)})
	}
	return elbResult("DescribeTags", res), nil
}

// sslPolicies are AWS's predefined security policies for TLS listeners of
// network load balancers (ELBv2 API reference, DescribeSSLPolicies).
var sslPolicies = []string{
	"ELBSecurityPolicy-2016-08", "ELBSecurityPolicy-FS-1-2-Res-2020-10", "ELBSecurityPolicy-TLS-1-2-2017-01",
	"ELBSecurityPolicy-TLS-1-2-Ext-2018-06", "ELBSecurityPolicy-TLS13-1-0-2021-06", "ELBSecurityPolicy-TLS13-1-1-2021-06",
	"ELBSecurityPolicy-TLS13-1-2-2021-06", "ELBSecurityPolicy-TLS13-1-2-Ext1-2021-06", "ELBSecurityPolicy-TLS13-1-2-Ext2-2021-06",
	"ELBSecurityPolicy-TLS13-1-2-Res-2021-06", "ELBSecurityPolicy-TLS13-1-3-2021-06",
}

// defaultSSLPolicy is what AWS gives a TLS listener made through its API
// without a policy.
const defaultSSLPolicy = "ELBSecurityPolicy-2016-08"

// AddCertificate makes a certificate ARN known, as an issued ACM
// certificate of the region: TLS listeners refuse others.
func (s *Server) AddCertificate(arn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.certs == nil {
		s.certs = map[string]bool{}
	}
	s.certs[arn] = true
}

// readTLS reads a listener's Certificates and SslPolicy: a TLS listener
// needs exactly one known certificate and takes a known policy (AWS's
// default when none was given); other listeners have neither.
func (s *Server) readTLS(f url.Values, l *listener) *Error {
	certs := items(f, "Certificates.member")
	if l.protocol != "TLS" {
		if len(certs) > 0 || f.Get("SslPolicy") != "" {
			return errorf("ValidationError", "Certificates and SslPolicy can be set only on TLS listeners")
		}
		l.cert, l.sslPolicy = "", ""
		return nil
	}
	switch {
	case len(certs) > 1:
		return errorf("ValidationError", "A listener takes exactly one default certificate")
	case len(certs) == 1:
		l.cert = f.Get(certs[0] + ".CertificateArn")
	}
	if l.cert == "" {
		return errorf("ValidationError", "A certificate must be specified for TLS listeners")
	}
	if !s.certs[l.cert] {
		return errorf("CertificateNotFound", "Certificate '%s' not found", l.cert)
	}
	if p := f.Get("SslPolicy"); p != "" {
		l.sslPolicy = p
	}
	if l.sslPolicy == "" {
		l.sslPolicy = defaultSSLPolicy
	}
	if !contains(sslPolicies, l.sslPolicy) {
		return errorf("SSLPolicyNotFound", "SSL policy '%s' not found", l.sslPolicy)
	}
	return nil
}

type xmlSSLPolicy struct {
	Name string `xml:"Name"`
}

type sslPoliciesResult struct {
	SslPolicies []xmlSSLPolicy `xml:"SslPolicies>member"`
}

// describeSSLPolicies answers the named policies (all without names); an
// unknown name is SSLPolicyNotFound.
func (s *Server) describeSSLPolicies(f url.Values) (any, *Error) {
	names := list(f, "Names.member")
	if len(names) == 0 {
		names = sslPolicies
	}
	var res sslPoliciesResult
	for _, n := range names {
		if !contains(sslPolicies, n) {
			return nil, errorf("SSLPolicyNotFound", "SSL policy '%s' not found", n)
		}
		res.SslPolicies = append(res.SslPolicies, xmlSSLPolicy{Name: n})
	}
	return elbResult("DescribeSSLPolicies", res), nil
}

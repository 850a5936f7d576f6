package awsfake

import "slices"

// elbIndex holds the fake's secondary indexes over its ELBv2 resources so
// that a call naming resources (by ARN, by name, by load balancer) costs
// what it answers, not what the fake holds: a scale run's thousands of
// load balancers must measure the CCM, not the fake. Every create and
// delete, and every change of a listener's target group, goes through the
// put and drop functions below, which keep the indexes in step.
type elbIndex struct {
	// lbByName and tgByName map names (unique in an account and region)
	// to ARNs.
	lbByName map[string]string
	tgByName map[string]string
	// listenersOf are each load balancer's listeners' ARNs.
	listenersOf map[string]map[string]bool
	// forwarders are, by target group ARN, the listeners forwarding to it
	// (all of one load balancer: AWS refuses a second).
	forwarders map[string]map[string]bool
	// lbKeys and tgKeys are every load balancer's and target group's ARN,
	// sorted, for the unfiltered calls' pages (nil: to be sorted again).
	lbKeys, tgKeys []string
}

func newELBIndex() elbIndex {
	return elbIndex{lbByName: map[string]string{}, tgByName: map[string]string{},
		listenersOf: map[string]map[string]bool{}, forwarders: map[string]map[string]bool{}}
}

func (s *Server) putLB(lb *loadBalancer) {
	s.lbs[lb.arn] = lb
	s.idx.lbByName[lb.name] = lb.arn
	s.idx.lbKeys = nil
}

// dropLB deletes a load balancer and its listeners.
func (s *Server) dropLB(lb *loadBalancer) {
	for arn := range s.idx.listenersOf[lb.arn] {
		s.dropListener(s.listeners[arn])
	}
	delete(s.idx.listenersOf, lb.arn)
	delete(s.idx.lbByName, lb.name)
	delete(s.lbs, lb.arn)
	s.idx.lbKeys = nil
}

func (s *Server) putTG(tg *targetGroup) {
	s.tgs[tg.arn] = tg
	s.idx.tgByName[tg.name] = tg.arn
	s.idx.tgKeys = nil
}

func (s *Server) dropTG(arn string) {
	if tg := s.tgs[arn]; tg != nil {
		delete(s.idx.tgByName, tg.name)
	}
	delete(s.tgs, arn)
	s.idx.tgKeys = nil
}

// putListener stores a new listener or a changed one (whose target group
// may have changed).
func (s *Server) putListener(l *listener) {
	if old := s.listeners[l.arn]; old != nil {
		s.unlinkListener(old)
	}
	s.listeners[l.arn] = l
	addTo(s.idx.listenersOf, l.lbARN, l.arn)
	addTo(s.idx.forwarders, l.tgARN, l.arn)
}

func (s *Server) dropListener(l *listener) {
	s.unlinkListener(l)
	delete(s.listeners, l.arn)
}

func (s *Server) unlinkListener(l *listener) {
	removeFrom(s.idx.listenersOf, l.lbARN, l.arn)
	removeFrom(s.idx.forwarders, l.tgARN, l.arn)
}

func addTo(m map[string]map[string]bool, key, v string) {
	if m[key] == nil {
		m[key] = map[string]bool{}
	}
	m[key][v] = true
}

func removeFrom(m map[string]map[string]bool, key, v string) {
	delete(m[key], v)
	if len(m[key]) == 0 {
		delete(m, key)
	}
}

// lbOf returns the ARN of the load balancer whose listener forwards to tg.
func (s *Server) lbOf(tgARN string) string {
	for arn := range s.idx.forwarders[tgARN] {
		return s.listeners[arn].lbARN
	}
	return ""
}

// listenersOfLB returns a load balancer's listeners, sorted by ARN.
func (s *Server) listenersOfLB(lbARN string) []*listener {
	var out []*listener
	for _, arn := range sortedKeys(s.idx.listenersOf[lbARN]) {
		out = append(out, s.listeners[arn])
	}
	return out
}

// lbCandidates returns, sorted and distinct, the ARNs of the load balancers
// a DescribeLoadBalancers may answer with: those named by ARN, else by
// name, else all.
func (s *Server) lbCandidates(names, arns []string) []string {
	switch {
	case len(arns) > 0:
		return present(s.lbs, arns)
	case len(names) > 0:
		return present(s.lbs, lookup(s.idx.lbByName, names))
	}
	if s.idx.lbKeys == nil {
		s.idx.lbKeys = sortedKeys(s.lbs)
	}
	return s.idx.lbKeys
}

// tgCandidates returns, sorted and distinct, the ARNs of the target groups
// a DescribeTargetGroups may answer with: those named by ARN, else by
// name, else those a load balancer's listeners forward to, else all.
func (s *Server) tgCandidates(names, arns []string, lbARN string) []string {
	switch {
	case len(arns) > 0:
		return present(s.tgs, arns)
	case len(names) > 0:
		return present(s.tgs, lookup(s.idx.tgByName, names))
	case lbARN != "":
		var forwarded []string
		for arn := range s.idx.listenersOf[lbARN] {
			forwarded = append(forwarded, s.listeners[arn].tgARN)
		}
		return present(s.tgs, forwarded)
	}
	if s.idx.tgKeys == nil {
		s.idx.tgKeys = sortedKeys(s.tgs)
	}
	return s.idx.tgKeys
}

// listenerCandidates returns, sorted and distinct, the ARNs of the
// listeners a DescribeListeners may answer with: those named, else the
// load balancer's.
func (s *Server) listenerCandidates(lbARN string, arns []string) []string {
	if len(arns) > 0 {
		return present(s.listeners, arns)
	}
	return sortedKeys(s.idx.listenersOf[lbARN])
}

// lookup returns the values of the keys m has.
func lookup(m map[string]string, keys []string) []string {
	var out []string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out = append(out, v)
		}
	}
	return out
}

// present returns, sorted and distinct, the keys m has.
func present[V any](m map[string]V, keys []string) []string {
	var out []string
	for _, k := range keys {
		if _, ok := m[k]; ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

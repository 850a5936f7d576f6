package svcstate

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// maxProblems bounds the problems remembered; past it, the memory starts
// over (and each problem is logged once more).
const maxProblems = 10000

// problems remembers the last problem reported for each object, so an
// unchanged problem is logged once and then only at high verbosity: the
// node-lifecycle controller asks about every NotReady node every 5 s, and
// an unmanaged node's problem never changes. Events deduplicate
// themselves.
type problems struct {
	mu   sync.Mutex
	last map[problemKey]problem
}

type problemKey struct{ kind, namespace, name string }

type problem struct{ reason, msg string }

func keyOf(obj *corev1.ObjectReference) problemKey {
	return problemKey{kind: obj.Kind, namespace: obj.Namespace, name: obj.Name}
}

// Changed records the object's problem and reports whether it differs
// from the last one recorded.
func (p *problems) Changed(obj *corev1.ObjectReference, reason, msg string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := keyOf(obj)
	if last, ok := p.last[k]; ok && last.reason == reason && last.msg == msg {
		return false
	}
	if p.last == nil || len(p.last) >= maxProblems {
		p.last = map[problemKey]problem{}
	}
	p.last[k] = problem{reason: reason, msg: msg}
	return true
}

// NodeResolved forgets the node's problem: if it comes back, it is
// logged. It allocates nothing, as it runs on every successful node call.
func (p *problems) NodeResolved(node *corev1.Node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.last) > 0 {
		delete(p.last, problemKey{kind: "Node", name: node.Name})
	}
}

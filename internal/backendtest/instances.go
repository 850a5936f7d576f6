package backendtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

var instanceClauses = []clause{
	{"running instance exists", runningExists},
	{"gone instance is false", goneIsFalse},
	{"absent instance is false", absentIsFalse},
	{"unreadable instance is an error", unreadableIsError},
	{"outage is an error", outageIsError},
	{"foreign providerID is an error", foreignIsError},
	{"malformed providerID is a user error", malformedIsUserError},
	{"shutdown only on fresh evidence", shutdownIsFresh},
	{"no-providerID node claimed only on a strong match", claimOnlyStrong},
	{"errors are classed by the backend's type", errorsAreClassed},
}

// exists asks InstanceExists, failing the test on a false for a node that
// must never be called gone.
func (s *suite) exists(node *corev1.Node) (bool, error) {
	return s.iv2.InstanceExists(s.ctx, withoutCache(node))
}

// metadata asks InstanceMetadata and fails the test on (nil, nil).
func (s *suite) metadata(t *testing.T, node *corev1.Node) error {
	t.Helper()
	md, err := s.iv2.InstanceMetadata(s.ctx, withoutCache(node))
	if err == nil && md == nil {
		t.Errorf("InstanceMetadata(%s) = (nil, nil): it must return metadata or an error", nodeName(node))
	}
	return err
}

// withoutCache hands the backend a copy, so a backend that keeps the
// pointer sees no later change the suite makes.
func withoutCache(node *corev1.Node) *corev1.Node { return node.DeepCopy() }

// mustNeverBeGone asks InstanceExists, InstanceShutdown and
// InstanceMetadata about node for the fixture's settle time (at least three
// times), failing on any (false, nil) or (nil, nil); it returns the last
// answers' errors.
func (s *suite) mustNeverBeGone(t *testing.T, node *corev1.Node, why string) (existsErr, shutdownErr, metadataErr error) {
	t.Helper()
	deadline := time.Now().Add(s.f.Settle)
	for i := 0; i < 3 || time.Now().Before(deadline); i++ {
		ok, err := s.exists(node)
		if err == nil && !ok {
			t.Fatalf("InstanceExists(%s) = (false, nil) %s: that deletes the Node; it must be an error", nodeName(node), why)
		}
		existsErr = err
		_, shutdownErr = s.iv2.InstanceShutdown(s.ctx, withoutCache(node))
		metadataErr = s.metadata(t, node)
		if s.ctx.Err() != nil {
			t.Fatal(s.ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return existsErr, shutdownErr, metadataErr
}

// wantExists polls until InstanceExists(node) is (want, nil) within the
// settle time. A running instance must never be called gone on the way.
func (s *suite) wantExists(t *testing.T, node *corev1.Node, want bool) {
	t.Helper()
	err := poll(s.ctx, s.f.Settle, func() error {
		ok, err := s.exists(node)
		if err != nil {
			return err
		}
		if !want && ok {
			return errors.New("still true")
		}
		if want && !ok {
			t.Fatalf("InstanceExists(%s) = (false, nil) for a running instance: that deletes the Node", nodeName(node))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("InstanceExists(%s) did not become (%v, nil) within %v: %v", nodeName(node), want, s.f.Settle, err)
	}
}

func runningExists(t *testing.T, s *suite) {
	h := s.f.Instances
	skipUnless(t, h.Running != nil, "Running")
	node := h.Running(t)
	s.wantExists(t, node, true)
	md, err := s.iv2.InstanceMetadata(s.ctx, withoutCache(node))
	if err != nil || md == nil {
		t.Fatalf("InstanceMetadata(%s) = (%v, %v), want metadata", nodeName(node), md, err)
	}
	if md.ProviderID != "" && md.ProviderID != node.Spec.ProviderID {
		t.Errorf("InstanceMetadata(%s).ProviderID = %q, want the node's own", nodeName(node), md.ProviderID)
	}
	off, err := s.iv2.InstanceShutdown(s.ctx, withoutCache(node))
	if err != nil || off {
		t.Errorf("InstanceShutdown(%s) of a running instance = (%v, %v), want (false, nil)", nodeName(node), off, err)
	}
}

func goneIsFalse(t *testing.T, s *suite) {
	h := s.f.Instances
	skipUnless(t, h.Running != nil && h.Gone != nil, "Running and Gone")
	node := h.Running(t)
	s.wantExists(t, node, true)
	h.Gone(t, node)
	s.wantExists(t, node, false)
	_ = s.metadata(t, node)
}

func absentIsFalse(t *testing.T, s *suite) {
	h := s.f.Instances
	skipUnless(t, h.Absent != nil, "Absent")
	node := providerIDNode("absent", h.Absent(t))
	s.wantExists(t, node, false)
	_ = s.metadata(t, node)
}

func unreadableIsError(t *testing.T, s *suite) {
	h := s.f.Instances
	skipUnless(t, h.Running != nil && h.Unreadable != nil, "Running and Unreadable")
	node := h.Running(t)
	s.wantExists(t, node, true)
	h.Unreadable(t, node)
	existsErr, shutdownErr, metadataErr := s.mustNeverBeGone(t, node, "for an instance whose state the cloud cannot read")
	for op, err := range map[string]error{"InstanceExists": existsErr, "InstanceShutdown": shutdownErr, "InstanceMetadata": metadataErr} {
		if err == nil {
			t.Errorf("%s(%s) of an unreadable instance succeeded after %v; want an error", op, nodeName(node), s.f.Settle)
		}
	}
}

func outageIsError(t *testing.T, s *suite) {
	h := s.f.Instances
	skipUnless(t, h.Running != nil && h.Outage != nil && h.Absent != nil, "Running, Outage and Absent")
	node := h.Running(t)
	s.wantExists(t, node, true)
	absent := providerIDNode("absent", h.Absent(t))
	restore := h.Outage(t)
	_, _, _ = s.mustNeverBeGone(t, node, "during an outage")
	existsErr, _, _ := s.mustNeverBeGone(t, absent, "during an outage (the cloud could not have said so)")
	if existsErr == nil {
		t.Errorf("InstanceExists(%s) during an outage succeeded; want an error", nodeName(absent))
	}
	restore()
	s.wantExists(t, node, true)
	s.wantExists(t, absent, false)
}

func foreignIsError(t *testing.T, s *suite) {
	h := s.f.Instances
	skipUnless(t, h.Foreign != nil || h.ForeignNodes != nil, "Foreign or ForeignNodes")
	var nodes []*corev1.Node
	if h.Foreign != nil {
		for i, id := range h.Foreign(t) {
			nodes = append(nodes, providerIDNode(fmt.Sprintf("foreign-%d", i), id))
		}
	}
	if h.ForeignNodes != nil {
		nodes = append(nodes, h.ForeignNodes(t)...)
	}
	if len(nodes) == 0 {
		t.Skip("neither the scheme nor the node's record names a region, zone or site")
	}
	for _, node := range nodes {
		existsErr, shutdownErr, metadataErr := s.mustNeverBeGone(t, node, "for a providerID this backend does not serve")
		if existsErr == nil || shutdownErr == nil || metadataErr == nil {
			t.Errorf("%s: want errors from InstanceExists, InstanceShutdown and InstanceMetadata, got %v, %v, %v", nodeName(node), existsErr, shutdownErr, metadataErr)
		}
	}
}

func malformedIsUserError(t *testing.T, s *suite) {
	h := s.f.Instances
	skipUnless(t, len(h.Malformed) > 0, "Malformed")
	for i, id := range h.Malformed {
		node := providerIDNode(fmt.Sprintf("malformed-%d", i), id)
		ok, err := s.exists(node)
		if err == nil {
			t.Errorf("InstanceExists(%s) = (%v, nil), want an error", nodeName(node), ok)
			continue
		}
		if ue, isUser := backends.AsUserError(err); !isUser || ue.Reason != ReasonInvalidProviderID {
			t.Errorf("InstanceExists(%s) error %q is not a backends.UserError with reason %s", nodeName(node), err, ReasonInvalidProviderID)
		}
		if err := s.metadata(t, node); err == nil {
			t.Errorf("InstanceMetadata(%s) succeeded, want an error", nodeName(node))
		}
		if _, err := s.iv2.InstanceShutdown(s.ctx, withoutCache(node)); err == nil {
			t.Errorf("InstanceShutdown(%s) succeeded, want an error", nodeName(node))
		}
	}
}

// shutdownIsFresh powers an instance off until the backend says so, powers
// it on, and asks at once: a true then came from a snapshot older than the
// power change, and would taint a running node.
func shutdownIsFresh(t *testing.T, s *suite) {
	h := s.f.Instances
	skipUnless(t, h.Running != nil && h.PowerOff != nil && h.PowerOn != nil, "Running, PowerOff and PowerOn")
	node := h.Running(t)
	s.wantExists(t, node, true)
	if off, err := s.iv2.InstanceShutdown(s.ctx, withoutCache(node)); err != nil || off {
		t.Fatalf("InstanceShutdown(%s) while running = (%v, %v), want (false, nil)", nodeName(node), off, err)
	}
	h.PowerOff(t, node)
	err := poll(s.ctx, s.f.Settle, func() error {
		off, err := s.iv2.InstanceShutdown(s.ctx, withoutCache(node))
		if err == nil && !off {
			err = errors.New("still false")
		}
		return err
	})
	if err != nil {
		t.Fatalf("InstanceShutdown(%s) did not become true within %v of powering off: %v", nodeName(node), s.f.Settle, err)
	}
	h.PowerOn(t, node)
	if off, err := s.iv2.InstanceShutdown(s.ctx, withoutCache(node)); err != nil || off {
		t.Fatalf("InstanceShutdown(%s) right after powering on = (%v, %v), want (false, nil): a true must come from fresh evidence", nodeName(node), off, err)
	}
	s.wantExists(t, node, true)
}

func claimOnlyStrong(t *testing.T, s *suite) {
	h := s.f.Instances
	skipUnless(t, h.StrongMatch != nil || h.WeakMatch != nil, "StrongMatch or WeakMatch")
	if h.StrongMatch != nil {
		node := h.StrongMatch(t)
		s.wantExists(t, node, true)
		md, err := s.iv2.InstanceMetadata(s.ctx, withoutCache(node))
		if err != nil || md == nil || md.ProviderID == "" {
			t.Errorf("InstanceMetadata(%s), a strong match, = (%+v, %v): want metadata with the instance's providerID", nodeName(node), md, err)
		}
	}
	if h.WeakMatch != nil {
		node := h.WeakMatch(t)
		ok, err := s.exists(node)
		if err != nil || ok {
			t.Errorf("InstanceExists(%s), a weak match, = (%v, %v): want (false, nil), the node is not claimed", nodeName(node), ok, err)
		}
	}
}

// providerIDNode is an initialised node with only a name and a providerID.
func providerIDNode(name, providerID string) *corev1.Node {
	n := &corev1.Node{}
	n.Name = name
	n.Spec.ProviderID = providerID
	return n
}

// errorsAreClassed checks the type's classifier against the errors the
// backend returns: while the cloud throttles every call, or refuses the
// credentials, a lookup the backend cannot answer from memory (an absent
// instance: only the cloud can say it is gone) fails with an error of class
// throttled, or auth; during an outage the error is never not_found, auth
// or throttled; a malformed providerID is user.
func errorsAreClassed(t *testing.T, s *suite) {
	skipUnless(t, s.f.Type != "", "Type")
	reg, ok := backends.Lookup(s.f.Type)
	if !ok || reg.ClassifyError == nil {
		t.Fatalf("type %q registers no ClassifyError: a backend classes its SDK's errors (backends.Registration)", s.f.Type)
	}
	h := s.f.Instances
	for i, id := range h.Malformed {
		_, err := s.exists(providerIDNode(fmt.Sprintf("malformed-%d", i), id))
		if got := backends.ClassifyErrorOf(s.f.Type, err); err != nil && got != backends.ClassUser {
			t.Errorf("InstanceExists of providerID %q: error %q is classed %s, want user", id, err, got)
		}
	}
	for _, c := range []struct {
		what  string
		hook  func(*testing.T) func()
		check func(backends.ErrorClass) bool
		want  string
	}{
		{"the cloud throttling every call", h.Throttle, func(c backends.ErrorClass) bool { return c == backends.ClassThrottled }, "throttled"},
		{"the cloud refusing the credentials", h.Refuse, func(c backends.ErrorClass) bool { return c == backends.ClassAuth }, "auth"},
		{"an outage", h.Outage, func(c backends.ErrorClass) bool {
			return c != backends.ClassNotFound && c != backends.ClassAuth && c != backends.ClassThrottled
		}, "neither not_found, auth nor throttled"},
	} {
		if c.hook == nil || h.Absent == nil || h.Running == nil {
			t.Logf("%s: skipped (the fixture has no hook for it, Absent or Running)", c.what)
			continue
		}
		s.classOfFailure(t, c.what, c.hook, c.check, c.want)
	}
}

// classOfFailure makes the cloud fail (hook), asks about an absent
// instance until the backend returns an error, and checks its class.
func (s *suite) classOfFailure(t *testing.T, what string, hook func(*testing.T) func(), check func(backends.ErrorClass) bool, want string) {
	t.Helper()
	h := s.f.Instances
	node := h.Running(t)
	s.wantExists(t, node, true)
	absent := providerIDNode("absent", h.Absent(t))
	restore := hook(t)
	defer restore()
	var err error
	deadline := time.Now().Add(s.f.Settle)
	for err == nil && time.Now().Before(deadline) && s.ctx.Err() == nil {
		var ok bool
		if ok, err = s.exists(absent); err == nil && ok {
			t.Fatalf("%s: InstanceExists(%s) = true for an instance that never existed", what, nodeName(absent))
		}
		if err == nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err == nil {
		t.Errorf("%s: InstanceExists(%s) kept succeeding for %v; want an error (only the cloud can say it is gone)", what, nodeName(absent), s.f.Settle)
		return
	}
	if got := backends.ClassifyErrorOf(s.f.Type, err); !check(got) {
		t.Errorf("%s: error %q is classed %s, want %s", what, err, got, want)
	}
	if got := backends.ClassifyError(err); !check(got) {
		t.Errorf("%s: error %q is classed %s by backends.ClassifyError (the router's), want %s", what, err, got, want)
	}
}

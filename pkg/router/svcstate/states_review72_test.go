package svcstate

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// consistent fails unless the expiry queue and the map of gone marks hold
// the same UIDs, once each, the queue oldest first.
func consistent(t *testing.T, st *States) {
	t.Helper()
	if len(st.gone) != len(st.goneAt) {
		t.Fatalf("the expiry queue holds %d marks, the map %d", len(st.gone), len(st.goneAt))
	}
	seen := map[types.UID]bool{}
	for i, g := range st.gone {
		if seen[g.uid] {
			t.Fatalf("the expiry queue holds %s twice", g.uid)
		}
		seen[g.uid] = true
		if at, ok := st.goneAt[g.uid]; !ok || !at.Equal(g.at) {
			t.Fatalf("queue entry %s at %v; the map has %v (%v)", g.uid, g.at, at, ok)
		}
		if i > 0 && g.at.Before(st.gone[i-1].at) {
			t.Fatalf("the expiry queue is out of order at %d", i)
		}
	}
}

// TestForgetTwiceKeepsQueueConsistent_review72: Forget called twice for one
// UID (the informer's delete, then a write that finds the Service gone),
// within deletedFor and after it: one mark, dated by the first Forget
// within the span, and renewed after it; queue and map agree throughout.
func TestForgetTwiceKeepsQueueConsistent_review72(t *testing.T) {
	st := New()
	now := time.Unix(1_000_000, 0)
	st.now = func() time.Time { return now }
	const x, y = types.UID("x"), types.UID("y")

	st.Remember(x, []string{"a"})
	st.Forget(x)
	first := now
	now = now.Add(time.Minute)
	st.Forget(y)
	now = now.Add(4 * time.Minute)
	st.Forget(x) // within deletedFor: the mark keeps its date
	consistent(t, st)
	if got := st.goneAt[x]; !got.Equal(first) {
		t.Errorf("the second Forget re-dated x's mark to %v, want %v", got, first)
	}
	if rec, _ := st.RecordedOf(x); !slices.Equal(rec, []string{"a"}) {
		t.Errorf("x's record after a second Forget = %v, want [a] kept", rec)
	}

	// Past x's span (not y's): x's mark and record expire; a Forget of x
	// again marks it anew.
	now = first.Add(deletedFor + 30*time.Second)
	st.Forget(x)
	consistent(t, st)
	if _, ok := st.RecordedOf(x); ok {
		t.Error("x's record outlived its mark")
	}
	if got := st.goneAt[x]; !got.Equal(now) {
		t.Errorf("x's renewed mark is dated %v, want %v", got, now)
	}
	if st.Gone() != 2 {
		t.Errorf("%d marks, want 2 (x anew, y)", st.Gone())
	}
	// y's span ends, then x's.
	now = now.Add(deletedFor + time.Second)
	st.Forget("z")
	consistent(t, st)
	if st.Gone() != 1 {
		t.Errorf("%d marks after both spans, want 1 (z)", st.Gone())
	}
	if n := st.Size(); n != 0 {
		t.Errorf("%d entries left, want 0", n)
	}
}

// TestGoneMarkIsPerUID_review72: a Service re-created under its name has a
// new UID; the old one's mark drops nothing of the new one's state, and
// the new one's later Forget does not re-date the old one's.
func TestGoneMarkIsPerUID_review72(t *testing.T) {
	st := New()
	now := time.Unix(1_000_000, 0)
	st.now = func() time.Time { return now }
	old, fresh := types.UID("old"), types.UID("new")
	st.SetShown(old, "a", []string{"192.0.2.1|"})
	st.Forget(old)
	st.SetShown(fresh, "a", []string{"192.0.2.2|"})
	st.SetDrains(fresh, Draining{"b": time.Unix(2_000_000, 0)})
	st.Remember(fresh, []string{"a", "b"})
	if fr := st.NewlyUnreachable(fresh, []string{"c"}); len(fr) != 1 {
		t.Errorf("first warning for the new Service: %v", fr)
	}
	if fr := st.NewlyUnreachable(fresh, []string{"c"}); len(fr) != 0 {
		t.Errorf("the new Service is warned again about c: %v (its episode was not kept)", fr)
	}
	if _, ok := st.ShownOf(fresh); !ok {
		t.Error("the new Service's shown addresses were dropped")
	}
	if _, ok := st.DrainsOf(fresh); !ok {
		t.Error("the new Service's drains were dropped")
	}
	if rec, _ := st.RecordedOf(fresh); len(rec) != 2 {
		t.Errorf("the new Service's record = %v", rec)
	}
	// The old one's calls still in flight write nothing back.
	st.SetShown(old, "a", []string{"192.0.2.1|"})
	st.Remember(old, nil)
	if _, ok := st.ShownOf(old); ok {
		t.Error("the old Service's addresses are kept")
	}
	if _, ok := st.RecordedOf(old); ok {
		t.Error("the old Service's empty record is kept")
	}
	consistent(t, st)
}

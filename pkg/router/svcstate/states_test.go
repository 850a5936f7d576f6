package svcstate

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestGoneServiceKeepsNoState: what a call still in flight writes for a
// Service after Forget is dropped, except a record naming a backend, which
// is kept deletedFor and then goes.
func TestGoneServiceKeepsNoState(t *testing.T) {
	st := New()
	now := time.Unix(1_000_000, 0)
	st.now = func() time.Time { return now }
	const uid = types.UID("gone")
	st.SetShown(uid, "a", []string{"192.0.2.1|"})
	st.SetDrains(uid, Draining{"b": time.Unix(0, 0)})
	st.Forget(uid)
	if n := st.Size(); n != 0 {
		t.Fatalf("after Forget %d entries are kept, want 0", n)
	}

	st.SetShown(uid, "a", []string{"192.0.2.1|"})
	st.SetDrains(uid, Draining{"b": time.Unix(0, 0)})
	if fresh := st.NewlyUnreachable(uid, []string{"c"}); len(fresh) != 1 {
		t.Errorf("NewlyUnreachable = %v, want c", fresh)
	}
	if _, ok := st.ShownOf(uid); ok {
		t.Error("the addresses of a gone Service are kept")
	}
	if _, ok := st.DrainsOf(uid); ok {
		t.Error("the drains of a gone Service are kept")
	}
	if len(st.unreachable) != 0 {
		t.Error("the unreachable backends of a gone Service are kept")
	}

	st.Remember(uid, []string{"a"})
	if rec, _ := st.RecordedOf(uid); len(rec) != 1 {
		t.Fatalf("the record written for a gone Service = %v, want it kept for a later delete", rec)
	}
	now = now.Add(deletedFor + time.Second)
	st.Forget("other")
	if n, gone := st.Size(), st.Gone(); n != 0 || gone != 1 {
		t.Errorf("after deletedFor: %d entries and %d gone Services kept, want 0 and 1 (the other)", n, gone)
	}
	st.SetShown(uid, "a", []string{"192.0.2.1|"})
	if _, ok := st.ShownOf(uid); !ok {
		t.Error("an expired gone mark still drops state")
	}
}

// TestGoneMarksExpireInOrder: Forget expires the marks older than
// deletedFor, and only those, however many there are.
func TestGoneMarksExpireInOrder(t *testing.T) {
	st := New()
	now := time.Unix(1_000_000, 0)
	st.now = func() time.Time { return now }
	for i := range 1000 {
		st.Forget(types.UID(fmt.Sprint(i)))
		now = now.Add(time.Second)
	}
	// 1,000 s have passed; deletedFor is 600 s: the marks made in the
	// first 400 s are older than that.
	st.Forget("last")
	if got, want := st.Gone(), 1000-400+1; got != want {
		t.Errorf("%d gone marks kept, want %d", got, want)
	}
	if len(st.gone) != len(st.goneAt) {
		t.Errorf("the expiry queue holds %d, the map %d", len(st.gone), len(st.goneAt))
	}
}

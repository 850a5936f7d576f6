package cloudapi

// Review probes (64b) of Budget.Retune joining the live buckets of its new
// key (commit 3961fa7): what the alias does to later retunes, to the
// removal of the backend whose buckets were joined, to the budget_rate
// gauge and to the adaptive state.

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// review64bLimits: one ec2 read token (refilled once in 1,000 s: spent,
// it stays spent for the test) or five.
func review64bLimits(bucket int) map[string]RateLimit {
	return map[string]RateLimit{"ec2": {QPS: 0.001, Bucket: bucket, QPSWrite: 0.001, BucketWrite: bucket}}
}

// review64bSpent reports whether b's next ec2 read is refused for its
// deadline (the bucket, refilled once in 1,000 s, is spent).
func review64bSpent(t *testing.T, b *Budget) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := b.Wait(ctx, "ec2", false)
	if err != nil && !errors.Is(err, ErrPastDeadline) {
		t.Fatal(err)
	}
	return err != nil
}

// review64bCollect runs the collector until the key's weak pointer is
// cleared (the buckets it named were collected), or gives up.
func review64bCollect(key string) bool {
	for range 20 {
		runtime.GC()
		shared.Lock()
		gone := shared.m[key].Value() == nil
		shared.Unlock()
		if gone {
			return true
		}
	}
	return false
}

// review64bJoined builds the reload of TestRetuneJoinsTheKeysLiveBuckets:
// kept, made under prefix|5, is retuned to prefix|1 after added was made
// under prefix|1.
func review64bJoined(prefix string) (kept, added *Budget) {
	defaults := review64bLimits(5)
	kept = NewSharedBudget(prefix+"-kept", prefix+"|5", nil, defaults)
	added = NewSharedBudget(prefix+"-added", prefix+"|1", review64bLimits(1), defaults)
	kept.Retune(prefix+"|1", review64bLimits(1), defaults)
	return kept, added
}

// TestReview64bRemovedThenReaddedAfterControl (control): two backends of one
// account started together; one is removed (collected) and added back by a
// later reload with the same limits: the one added back takes its tokens
// from the survivor's buckets (spent by it), as docs/aws.md's one budget
// per account says.
func TestReview64bRemovedThenReaddedAfterControl(t *testing.T) {
	defaults := review64bLimits(5)
	const key = "review64b-control|1"
	kept := NewSharedBudget("review64b-control-kept", key, review64bLimits(1), defaults)
	func() {
		_ = NewSharedBudget("review64b-control-other", key, review64bLimits(1), defaults)
	}()
	runtime.GC()
	runtime.GC()
	if review64bSpent(t, kept) {
		t.Fatal("the survivor's first read was refused")
	}
	again := NewSharedBudget("review64b-control-again", key, review64bLimits(1), defaults)
	if !review64bSpent(t, again) {
		t.Error("the backend added back has a full bucket of its own: the account's budget doubled")
	}
	runtime.KeepAlive(kept)
}

// TestReview64bJoinedThenHolderRemovedThenReadded: the reload of
// TestRetuneJoinsTheKeysLiveBuckets (aws-1 retuned, aws-2 added with the
// new limits: one budget), then a reload removing aws-2 (collected), then
// one adding it back with the same limits. An operator expects what the
// control gives: aws-2 added back shares aws-1's buckets (the one token
// aws-1 spent is spent for aws-2 too). The retuned budget aliased only
// the added one's per-API map, while the key's weak pointer named the
// added one's buckets: once those are collected, the key names nothing,
// and the backend added back starts a full bucket of its own beside
// aws-1's: twice the account's budget.
func TestReview64bJoinedThenHolderRemovedThenReadded(t *testing.T) {
	const prefix = "review64b-readd"
	defaults := review64bLimits(5)
	kept := func() *Budget {
		kept, added := review64bJoined(prefix)
		if review64bSpent(t, added) {
			t.Fatal("the added backend's first read was refused")
		}
		if !review64bSpent(t, kept) {
			t.Fatal("the retuned backend does not share the added one's buckets (the commit's own case)")
		}
		return kept
	}()
	if !review64bCollect(prefix + "|1") {
		t.Log("the added backend's buckets were not collected: the key still names them")
	}
	again := NewSharedBudget(prefix+"-again", prefix+"|1", review64bLimits(1), defaults)
	if !review64bSpent(t, again) {
		t.Error("aws-2, removed and added back after the retune joined its buckets, has a full bucket of its own beside aws-1's spent one: the account's budget doubled (the key's weak pointer named only the removed backend's buckets)")
	}
	runtime.KeepAlive(kept)
}

// TestReview64bJoinedThenKeptRebuilt: after the join, aws-1 is rebuilt
// (a change outside its rateLimits) while aws-2 is removed in the same
// reload: the rebuilt aws-1 is made while aws-2 still lives (it shares
// aws-2's buckets), then aws-2 goes. The rebuilt backend must still see
// the token spent before the reload (a rebuild keeps the account's budget
// while another backend of it lives, docs/aws.md).
func TestReview64bJoinedThenKeptRebuilt(t *testing.T) {
	const prefix = "review64b-rebuild"
	defaults := review64bLimits(5)
	rebuilt := func() *Budget {
		kept, added := review64bJoined(prefix)
		if review64bSpent(t, kept) {
			t.Fatal("the retuned backend's first read was refused")
		}
		rebuilt := NewSharedBudget(prefix+"-kept", prefix+"|1", review64bLimits(1), defaults)
		runtime.KeepAlive(added)
		return rebuilt
	}()
	review64bCollect(prefix + "|1")
	if !review64bSpent(t, rebuilt) {
		t.Error("the rebuilt backend has a full bucket although the account's token was spent before the reload")
	}
}

// TestReview64bJoinedStaysSharedAcrossRetunes: after the join, a later
// reload lowers both backends' limits again (two retunes, in either
// order, both before any request, as in one reload): they still take
// from one set of buckets.
func TestReview64bJoinedStaysSharedAcrossRetunes(t *testing.T) {
	for _, order := range []string{"added first", "kept first"} {
		t.Run(order, func(t *testing.T) {
			prefix := "review64b-retune-" + order
			defaults := review64bLimits(5)
			kept, added := review64bJoined(prefix)
			two := review64bLimits(2)
			if order == "added first" {
				added.Retune(prefix+"|2", two, defaults)
				kept.Retune(prefix+"|2", two, defaults)
			} else {
				kept.Retune(prefix+"|2", two, defaults)
				added.Retune(prefix+"|2", two, defaults)
			}
			if review64bSpent(t, kept) || review64bSpent(t, added) {
				t.Fatal("a read refused within the two tokens of the new limits")
			}
			if !review64bSpent(t, kept) || !review64bSpent(t, added) {
				t.Error("a third read allowed after two under limits of two tokens: the backends do not share one budget after the second retune")
			}
			runtime.KeepAlive(added)
		})
	}
}

// TestReview64bJoinedGaugeShowsTheSharedSlowDown: the retuned backend
// takes its tokens from the added one's buckets; a throttled answer to
// the added one slows the shared bucket down (adaptive mode, the
// default), and so the retuned backend's requests too. budget_rate under
// each backend shows the rate its requests get (the gauge is "set under
// every backend sharing the buckets", budget.go publish): under both the
// slowed rate, as for two backends started together. The alias shares
// the per-API map but not the sharers' list: the gauge was set under the
// added backend only, and the retuned one's stays at its ceiling.
func TestReview64bJoinedGaugeShowsTheSharedSlowDown(t *testing.T) {
	const prefix = "review64b-gauge"
	defs := map[string]RateLimit{"x": {QPS: 10, Bucket: 20, QPSWrite: 2, BucketWrite: 4}}
	kept := NewSharedBudget(prefix+"-kept", prefix+"|a", nil, defs)
	added := NewSharedBudget(prefix+"-added", prefix+"|b", nil, defs)
	kept.Retune(prefix+"|b", nil, defs)
	added.Observe("x", "", false, OutcomeThrottled, 0)
	slowed, ok := probe62bSeries(t, prefix+"-added", "x", "read")
	if !ok || slowed >= 10 {
		t.Fatalf("the added backend's gauge after a throttled answer: %v %v, want under 10", slowed, ok)
	}
	if g, _ := probe62bSeries(t, prefix+"-kept", "x", "read"); g != slowed {
		t.Errorf("budget_rate{backend=kept} = %v after the shared bucket slowed to %v: the retuned backend's requests are slowed but its gauge does not say so", g, slowed)
	}
	runtime.KeepAlive(kept)
	runtime.KeepAlive(added)
}

// TestReview64bJoinedRacesWaitObserve: Retune to a key held by another
// live budget while both wait for tokens and observe answers (-race).
func TestReview64bJoinedRacesWaitObserve(t *testing.T) {
	const prefix = "review64b-race"
	defs := map[string]RateLimit{"x": {QPS: 1000, Bucket: 1000, QPSWrite: 1000, BucketWrite: 1000}}
	kept := NewSharedBudget(prefix+"-kept", prefix+"|0", nil, defs)
	added := NewSharedBudget(prefix+"-added", prefix+"|1", nil, defs)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, b := range []*Budget{kept, added} {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = b.Wait(ctx, "x", false)
				cancel()
				b.Observe("x", "", false, OutcomeThrottled, 0)
				b.Observe("x", "", false, "ok", 0)
			}
		})
	}
	for i := range 200 {
		if i%2 == 0 {
			kept.Retune(prefix+"|1", nil, defs)
		} else {
			kept.Retune(prefix+"|0", nil, defs)
		}
	}
	close(stop)
	wg.Wait()
	if kept.buckets() != added.buckets() {
		t.Error("after the retunes, the two budgets take their tokens from two sets of buckets, want one")
	}
}

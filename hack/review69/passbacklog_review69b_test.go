package review69

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReview69bPassBacklogTestFindsTheDefect: pkg/lbcontroller's
// TestChangeNotQueuedBehindThePass must fail whenever the pass queues all
// its Services at once (the defect it guards). It takes the edit's re-sync
// of web-00 to be the first "ensure web-00" after calls[0]
// (`again := slices.Index(calls[1:], "ensure web-00") + 1`, and the wait
// "web-00 ensured again" likewise looks at calls[1:]): it assumes the
// call log begins with the pass's own check of web-00. Run(ctx, 2) has two
// workers: the pass's web-00 and web-01 are synced at once, and either may
// call EnsureLoadBalancer first. When web-01's comes first, calls[1] is
// the pass's check of web-00, `again` is 1, and the test passes at once,
// whatever the queue does.
//
// Seen (session 69b), with `for c.queue.Len() > c.passBacklog()` in
// repair.go changed to never loop, go test -race -count=3 and -count=4
// (a t.Logf of the calls added for the second): 5 of 7 runs failed as
// they should; one logged
//
//	calls [ensure web-01 ensure web-00 ensure web-02 ... ensure web-11 ensure web-00] again=1 last=11
//
// and PASSED (the edit's sync, the last call, came after every Service
// of the pass). 4abe98b (the last ensure of web-11) did not bring this:
// `calls[1:]` is older; it stays.
//
// This probe reads the test's source (building and running pkg/lbcontroller
// under -race is not for a probe of seconds): it FAILS while `again` is
// found in calls[1:]. Smallest fix: the edit's sync is the second "ensure
// web-00": first := slices.Index(calls, "ensure web-00"); again :=
// first + 1 + slices.Index(calls[first+1:], "ensure web-00") (and the
// wait: two "ensure web-00" in the log).
//
// Failed before session 69's fix (session 69b).
func TestReview69bPassBacklogTestFindsTheDefect(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "pkg/lbcontroller/passbacklog_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, assumes := range []string{
		`slices.Index(calls[1:], "ensure web-00") + 1`,
		`slices.Contains(calls[1:], "ensure web-00")`,
	} {
		if strings.Contains(string(src), assumes) {
			t.Errorf("TestChangeNotQueuedBehindThePass takes calls[0] for the pass's check of web-00 (%s): with web-01's EnsureLoadBalancer logged first, it passes without the pass's backlog bound", assumes)
		}
	}
}

package framework

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestWaitForKeepsWhatWasSeenWhenALimiterRefusesTheDeadline: a poll whose
// client refuses a wait that would pass the deadline (client-go's rate
// limiter, "rate: Wait(n=1) would exceed context deadline") ends the wait
// as a timeout that says what was last seen, not as a bare error.
func TestWaitForKeepsWhatWasSeenWhenALimiterRefusesTheDeadline(t *testing.T) {
	polls := 0
	err := WaitFor(context.Background(), time.Minute, "every Service converged", func(context.Context) (bool, string, error) {
		polls++
		if polls < 3 {
			return false, "s-1 still being deleted", nil
		}
		return false, "", errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")
	})
	if err == nil || !strings.Contains(err.Error(), "last seen: s-1 still being deleted") || !strings.Contains(err.Error(), "would exceed context deadline") {
		t.Errorf("error %v, want the timeout with what was last seen and the limiter's refusal", err)
	}
	err = WaitFor(context.Background(), time.Minute, "x", func(context.Context) (bool, string, error) {
		return false, "seen", errors.New("forbidden")
	})
	if err == nil || strings.Contains(err.Error(), "timed out") {
		t.Errorf("another error %v, want it as it is", err)
	}
}

package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// LogLines is how many lines of each process's log a failing test prints.
const LogLines = 150

// StartControlPlaneT starts a control plane for one test and stops it when
// the test ends, printing the logs' tails if the test failed. It skips or
// fails (with CI set) when the binaries are missing. extraAPIServerArgs
// are ControlPlaneOptions.ExtraAPIServerArgs.
func StartControlPlaneT(tb testing.TB, extraAPIServerArgs ...string) *ControlPlane {
	tb.Helper()
	bins := RequireBinaries(tb, Binaries.ControlPlaneOnly)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cp, err := StartControlPlane(ctx, ControlPlaneOptions{Binaries: bins, ExtraAPIServerArgs: extraAPIServerArgs})
	if err != nil {
		tb.Fatalf("start control plane: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Log(cp.Logs(LogLines))
		}
		if err := cp.Stop(tb.Failed()); err != nil {
			tb.Errorf("stop control plane: %v", err)
		}
	})
	return cp
}

// StartCCMT starts a CCM for one test and stops it when the test ends,
// printing its log's tail if the test failed. It skips or fails (with CI
// set) when the CCM binary is missing.
func (cp *ControlPlane) StartCCMT(tb testing.TB, opts CCMOptions) *CCM {
	tb.Helper()
	if err := cp.Binaries.Check([]string{cp.Binaries.CCM}); err != nil {
		MissingBinaries(tb, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ccm, err := cp.StartCCM(ctx, opts)
	if ccm != nil && ccm.Process != nil {
		tb.Cleanup(func() {
			if stopErr := ccm.Stop(15 * time.Second); stopErr != nil && !opts.SkipReadyWait {
				tb.Errorf("stop %s: %v", ccm.Name(), stopErr)
			}
			if tb.Failed() {
				tb.Log(ccm.Logs(LogLines))
			}
		})
	}
	if err != nil {
		tb.Fatalf("start CCM: %v", err)
	}
	return ccm
}

// Logs returns the tail of the CCM's log, with its path.
func (c *CCM) Logs(lines int) string {
	return fmt.Sprintf("----- %s log (%s) -----\n%s\n", c.Name(), c.LogPath(), c.LogTail(lines))
}

// Shared is one control plane, started on first use and shared by every
// test in a test binary. Use it from TestMain:
//
//	var suite framework.Shared
//	func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }
//	func TestX(t *testing.T) { cp := suite.ControlPlane(t) ... }
type Shared struct {
	once   sync.Once
	cp     *ControlPlane
	err    error
	failed bool
	mu     sync.Mutex
	onStop []func()
}

// OnStop registers fn to run after the tests and before the control plane
// stops (last registered first), for processes shared by the tests.
func (s *Shared) OnStop(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onStop = append(s.onStop, fn)
}

// Failed reports whether a test using the shared control plane failed.
func (s *Shared) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// ControlPlane returns the shared control plane, starting it on the first
// call. Missing binaries skip (or, with CI set, fail) every test that asks.
func (s *Shared) ControlPlane(tb testing.TB) *ControlPlane {
	tb.Helper()
	s.once.Do(func() {
		bins, err := FindBinaries()
		if err == nil {
			err = bins.Check(bins.All())
		}
		if err != nil {
			s.err = &missingError{err}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		s.cp, s.err = StartControlPlane(ctx, ControlPlaneOptions{Binaries: bins})
	})
	var me *missingError
	if errors.As(s.err, &me) {
		MissingBinaries(tb, me.err)
	}
	if s.err != nil {
		tb.Fatalf("start control plane: %v", s.err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			s.mu.Lock()
			s.failed = true
			s.mu.Unlock()
		}
	})
	return s.cp
}

type missingError struct{ err error }

func (e *missingError) Error() string { return e.err.Error() }

// Run runs the tests, then the OnStop functions, then stops the shared
// control plane, printing its logs' tails and keeping its folder when a
// test failed.
func (s *Shared) Run(m *testing.M) int {
	code := m.Run()
	for i := len(s.onStop) - 1; i >= 0; i-- {
		s.onStop[i]()
	}
	if s.cp == nil {
		return code
	}
	failed := code != 0 || s.Failed()
	if failed {
		fmt.Fprint(os.Stderr, s.cp.Logs(LogLines))
		fmt.Fprintf(os.Stderr, "e2e: files kept in %s\n", s.cp.Dir)
	}
	if err := s.cp.Stop(failed); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: stop control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

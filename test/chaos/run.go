package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// settleDefault bounds convergence at quiescence: after a fault, the
// controllers retry a Service with exponential backoff (5 s doubling per
// failure up to 300 s, upstream's and our controller's), so a Service
// that failed five times in a row is next tried 80 s later, and one that
// failed seven times or more (each change or reload re-syncs it at once,
// and each failure counts) 300 s later: the bound is that, and 30 s for
// the retry itself. A sequence that converges is judged as soon as it
// does; only a Service still unconverged waits it out (seed 698174222:
// s0 failed 7 times in 6 s during an AWS outage, and the old bound of
// 150 s ended before its retry).
const settleDefault = 330 * time.Second

// RunOptions configures one run of a sequence.
type RunOptions struct {
	// Dir is the run's folder (logs, certificates, cloud-config); it is
	// removed after a run with no violation unless Keep.
	Dir  string
	Keep bool
	// Settle bounds the wait for every Service to converge at quiescence.
	Settle time.Duration
	// Logf prints progress.
	Logf func(string, ...any)
	// Ignore are violation classes only logged, not judged (a defect known
	// and being fixed, while the judge hunts others).
	Ignore []string
	// Features are the world's optional parts (the sequence's).
	Features Features
}

// Result is what one run found.
type Result struct {
	// Violations are the broken invariants; empty when the run passed.
	Violations []Violation
	// Step is the number of steps applied when the first violation was
	// seen (len of the sequence: at quiescence).
	Step int
	// Elapsed is the run's wall time, Found the time from its start to the
	// first violation.
	Elapsed, Found time.Duration
	// Dir holds the logs (kept when Violations is not empty).
	Dir string
	// Counts are the operations applied, by kind.
	Counts map[Kind]int
}

// Failed reports whether the run broke an invariant.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

// Classes are the distinct classes of the violations.
func (r *Result) Classes() []string {
	var out []string
	for _, v := range r.Violations {
		if !slices.Contains(out, v.Class) {
			out = append(out, v.Class)
		}
	}
	slices.Sort(out)
	return out
}

// ErrMissingBinaries is wrapped by Run's error when the binaries are not
// built.
var ErrMissingBinaries = errors.New("binaries missing")

// Run runs ops in a new world and judges it: the safety invariants after
// every step, everything at quiescence. An error means the judge could not
// run (the world did not start), not that the CCM is wrong.
func Run(ctx context.Context, ops []Op, opts RunOptions) (*Result, error) {
	if opts.Settle == 0 {
		opts.Settle = settleDefault
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, err
	}
	start := time.Now()
	if opts.Features.OS {
		opts.Settle = max(opts.Settle, osSettle)
	}
	w, err := startWorld(ctx, opts.Dir, opts.Features, opts.Logf)
	var mb *missingBinaries
	if errors.As(err, &mb) {
		return nil, fmt.Errorf("%w: %w", ErrMissingBinaries, err)
	}
	if err != nil {
		return nil, fmt.Errorf("start the world: %w", err)
	}
	opts.Logf("world up in %s (%s)", time.Since(start).Round(time.Millisecond), opts.Dir)
	res := &Result{Dir: opts.Dir, Step: len(ops), Counts: map[Kind]int{}}
	m := newModelFor(opts.Features)
	w.ignore = opts.Ignore
	res.Violations, res.Step = w.steps(ctx, m, ops, res.Counts)
	if len(res.Violations) == 0 {
		res.Violations = w.quiesce(ctx, m, opts)
	}
	if len(res.Violations) == 0 {
		res.Violations = w.judged(w.growth(ctx))
	}
	if w.os != nil {
		calls, failed := w.os.proxy.counts()
		opts.Logf("Octavia: %d calls of the replicas, %d of them failed or held by the judge (os-outage, os-fail, os-hang)", calls, failed)
	}
	res.Found = time.Since(start)
	res.Violations = append(res.Violations, w.judged(w.panics())...)
	w.stop()
	res.Elapsed = time.Since(start)
	if !res.Failed() && !opts.Keep {
		_ = os.RemoveAll(opts.Dir)
	}
	return res, nil
}

// steps applies ops one by one, each followed by its gap and the safety
// checks; it stops at the first violation.
func (w *World) steps(ctx context.Context, m *model, ops []Op, counts map[Kind]int) ([]Violation, int) {
	for i, op := range ops {
		// A stranger is another controller's only once the leader applied
		// the reload that unset defaultBackend (the generator draws that
		// reload just before): until then it serves the new Service by the
		// default, as it must (chaos seed 989441637: a stranger created
		// 237 ms after that reload).
		applied := op.Kind != StrangerApply || w.awaitConfig(ctx)
		before, err := w.snapshot(ctx)
		if err != nil {
			return []Violation{violation(vCrash, "the API server: %v", err)}, i
		}
		m.record(op, before, i)
		if st := m.strangers[op.Name]; op.Kind == StrangerApply && !applied && st != nil {
			w.logf("  the leader has not applied the configuration written last after %s: %s is not judged as another controller's", configWait, op.Name)
			st.protected = false
		}
		if op.Kind == SvcRecreate && w.inFailover() {
			m.abandoned[op.Name] = true
		}
		w.resume(false)
		w.deactivate(ctx)
		w.logf("step %d/%d: %s", i+1, len(ops), op)
		var found []Violation
		if op.Kind == AWSKeyRotate || op.Kind == VSphereRotate || op.Kind == OSRotate {
			found = w.rotateKey(ctx, m, op, i)
		} else if err := w.apply(ctx, op); err != nil {
			w.logf("  step %d did not apply: %v", i+1, err)
		}
		counts[op.Kind]++
		select {
		case <-ctx.Done():
			return []Violation{violation(vCrash, "the run's deadline passed")}, i
		case <-time.After(op.Gap):
		}
		after, err := w.snapshot(ctx)
		if err != nil {
			return []Violation{violation(vCrash, "the API server: %v", err)}, i + 1
		}
		if v := w.judged(append(found, w.safety(ctx, m, after)...)); len(v) > 0 {
			return v, i + 1
		}
	}
	return nil, len(ops)
}

// quiesce ends every fault, then polls until every Service has converged
// (the safety checks still running), or opts.Settle passes.
func (w *World) quiesce(ctx context.Context, m *model, opts RunOptions) []Violation {
	w.fake.SetOutage(false)
	w.outage = false
	w.fake.Throttle(0)
	w.throttleEnd = 0
	if w.os != nil {
		w.os.proxy.setDown(false)
		w.os.proxy.fail(0)
		w.os.proxy.hang(0)
	}
	w.resume(true)
	for _, p := range w.proxies {
		p.hold(0)
	}
	start := time.Now()
	var last []Violation
	for {
		w.deactivate(ctx)
		s, err := w.snapshot(ctx)
		if err != nil {
			return []Violation{violation(vCrash, "the API server: %v", err)}
		}
		if v := w.judged(w.safety(ctx, m, s)); len(v) > 0 {
			return v
		}
		last = w.judged(w.settled(ctx, m, s))
		if len(last) == 0 {
			opts.Logf("converged %s after the last step: %s", time.Since(start).Round(time.Millisecond), summary(m, s))
			return nil
		}
		if time.Since(start) > opts.Settle {
			return last
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(time.Second):
		}
	}
}

// summary describes what the world ended with.
func summary(m *model, s *snapshot) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(s.svcs)) {
		svc := s.svcs[name]
		want, _ := m.cfg.wanted(m.svcs[name])
		parts = append(parts, fmt.Sprintf("%s%v=%v", name, want, ingress(svc)))
	}
	nlbs, oslbs := 0, 0
	for _, lbs := range s.nlbs {
		nlbs += len(lbs)
	}
	for _, lbs := range s.oslbs {
		oslbs += len(lbs)
	}
	return fmt.Sprintf("%d NLBs, %d Octavia load balancers, %d Nodes; %s", nlbs, oslbs, len(s.nodes), strings.Join(parts, " "))
}

// judged drops the violations of the ignored classes, logging them.
func (w *World) judged(vs []Violation) []Violation {
	return slices.DeleteFunc(vs, func(v Violation) bool {
		if slices.Contains(w.ignore, v.Class) {
			w.logf("ignored (%s): %s", strings.Join(w.ignore, ","), v)
			return true
		}
		return false
	})
}

// Replay is a sequence written to a file, to be run again.
type Replay struct {
	Seed  uint64 `json:"seed"`
	Steps int    `json:"steps"`
	// Features are the world the sequence was drawn for.
	Features Features `json:"features"`
	// Violations are what the sequence broke when it was written.
	Violations []Violation `json:"violations"`
	Ops        []Op        `json:"ops"`
}

// WriteReplay writes r to path as JSON.
func WriteReplay(path string, r Replay) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// ReadReplay reads a file WriteReplay wrote.
func ReadReplay(path string) (Replay, error) {
	var r Replay
	data, err := os.ReadFile(path) //nolint:gosec // The operator names the replay file.
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(data, &r)
}

// Describe renders ops one per line, numbered.
func Describe(ops []Op) string {
	var b strings.Builder
	for i, op := range ops {
		fmt.Fprintf(&b, "  %2d. %s\n", i+1, op)
	}
	return b.String()
}

// Shrinker reduces a failing sequence by delta debugging (Zeller's ddmin):
// it keeps removing chunks of steps while what remains still breaks an
// invariant of the same class, until no single step can go, or the budget
// is spent (the smallest failing sequence found so far is kept).
type Shrinker struct {
	// Try runs a candidate; it fails when a violation of one of Classes is
	// found.
	Try     func(ctx context.Context, ops []Op, trial int) (*Result, error)
	Classes []string
	Budget  time.Duration
	Logf    func(string, ...any)
}

// Shrink returns the smallest failing sequence found and its result (nil
// when no candidate failed: ops itself is returned).
func (s *Shrinker) Shrink(ctx context.Context, ops []Op) ([]Op, *Result) {
	deadline := time.Now().Add(s.Budget)
	var best *Result
	trial := 0
	fails := func(cand []Op) bool {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		trial++
		r, err := s.Try(ctx, cand, trial)
		if err != nil {
			s.Logf("shrink trial %d (%d steps): %v", trial, len(cand), err)
			return false
		}
		same := slices.ContainsFunc(r.Classes(), func(c string) bool { return slices.Contains(s.Classes, c) })
		s.Logf("shrink trial %d: %d steps: %v", trial, len(cand), r.Classes())
		if same {
			best = r
		}
		return same
	}
	cur := ops
	n := 2
	for len(cur) >= 2 && time.Now().Before(deadline) {
		chunks := split(cur, n)
		reduced := false
		for i := range chunks {
			if n > 2 && fails(chunks[i]) { // with two chunks, a chunk is the other's complement
				cur, n, reduced = chunks[i], 2, true
				break
			}
			comp := complement(chunks, i)
			if fails(comp) {
				cur, n, reduced = comp, max(n-1, 2), true
				break
			}
		}
		if !reduced {
			if n >= len(cur) {
				break
			}
			n = min(2*n, len(cur))
		}
	}
	return cur, best
}

func split(ops []Op, n int) [][]Op {
	var out [][]Op
	for i := range n {
		lo, hi := i*len(ops)/n, (i+1)*len(ops)/n
		if hi > lo {
			out = append(out, ops[lo:hi])
		}
	}
	return out
}

func complement(chunks [][]Op, skip int) []Op {
	var out []Op
	for i, c := range chunks {
		if i != skip {
			out = append(out, c...)
		}
	}
	return out
}

// RunDir is a fresh folder for a run under base.
func RunDir(base, name string) string {
	return filepath.Join(base, fmt.Sprintf("%s-%s", name, time.Now().UTC().Format("150405.000")))
}

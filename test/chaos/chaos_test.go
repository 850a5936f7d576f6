package chaos

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// Environment variables hack/chaos.sh passes from make chaos's variables.
const (
	envRun    = "CHAOS_RUN"        // set: TestChaos runs (else it skips)
	envSeed   = "CHAOS_SEED"       // the first seed (default: a fresh one)
	envSteps  = "CHAOS_STEPS"      // steps per sequence (default 40)
	envDur    = "CHAOS_DURATION"   // keep drawing new seeds this long (default: one sequence)
	envReplay = "CHAOS_REPLAY"     // a replay file to run instead
	envShrink = "CHAOS_SHRINK"     // the shrinker's budget (default 20m; 0 shrinks nothing)
	envOut    = "CHAOS_OUT"        // where runs and replay files go (default _output/chaos)
	envSettle = "CHAOS_SETTLE"     // bound on convergence at quiescence (default 330s)
	envIgnore = "CHAOS_IGNORE"     // violation classes only logged (comma-separated)
	envFresh  = "CHAOS_FRESH"      // 0: the slice runs its fixed seeds alone (default: one fresh seed too)
	envFreshS = "CHAOS_FRESH_SEED" // the slice's fresh seed (default: drawn from the tree under test)
	envOS     = "CHAOS_OS"         // 1: OpenStack required; 0: left out; default: make chaos uses it when the stack is up, the slice leaves it out
	envKeep   = "CHAOS_KEEP"       // set: keep every run's folder, passing ones too
	envShare  = "CHAOS_SHARE"      // 1: the share stream draws (Features.Share); 0: not; default: for fresh seeds only (a seed given draws as before)
)

// sliceSeeds are the fixed seeds of the slice make test runs (with one
// fresh seed): two 25-step sequences that between them kill the leader,
// pause it three times, hold back and cut the leader's watches, remove
// and add back classes, take AWS down, throttle it and re-create Services
// twice (as drawn since the class, credential and watch operations joined
// the generator; 800 and 802 before). Neither rotates a key: a rotation
// costs its step 6-7 s (854, which does, took 38 s, over the slice's 30 s
// a seed); fresh seeds do. Seeds that find issue 40's defects on 5bdbc0d
// (docs/testing.md) join them once those are fixed.
var sliceSeeds = []uint64{853, 946}

// sliceSteps is each slice sequence's length.
const sliceSteps = 25

// TestChaos is make chaos: one sequence (SEED, STEPS), a replay file
// (REPLAY), or fresh sequences for DURATION; a violation is shrunk and
// printed as a replay command.
func TestChaos(t *testing.T) {
	if os.Getenv(envRun) == "" {
		t.Skipf("make chaos runs this (%s=1)", envRun)
	}
	j := newJudge(t)
	if path := os.Getenv(envReplay); path != "" {
		r, err := ReadReplay(path)
		if err != nil {
			t.Fatal(err)
		}
		j.features = r.Features
		if ok, why := OpenStackAvailable(); r.Features.OS && !ok {
			t.Fatalf("%s was drawn for a world with OpenStack, and the stack's environment is not here: %s", path, why)
		}
		t.Logf("replaying %s: %d steps (seed %d, %+v)\n%s", path, len(r.Ops), r.Seed, r.Features, Describe(r.Ops))
		j.judge(r.Seed, r.Steps, r.Ops)
		return
	}
	j.features.OS = useOpenStack(t, true)
	j.features.Share = useShare(t, os.Getenv(envSeed) == "")
	seed := envUint(t, envSeed, freshSeed())
	steps := int(envUint(t, envSteps, 40))
	duration := envDuration(t, envDur, 0)
	// With DURATION, a failing seed is reported (and shrunk) and the run
	// goes on with the next one until the time is spent.
	start := time.Now()
	var failed []uint64
	for runs := 1; ; runs++ {
		if j.judge(seed, steps, GenerateFor(seed, steps, j.features)) {
			failed = append(failed, seed)
		}
		if time.Since(start)+j.lastElapsed > duration {
			t.Logf("%d sequences of %d steps in %s (seeds %d to %d); failing seeds: %v", runs, steps, time.Since(start).Round(time.Second), seed-uint64(runs)+1, seed, failed)
			return
		}
		seed++
	}
}

// TestChaosSlice is the part of the judge make test runs: the fixed seeds
// and one fresh seed, each a short sequence; a violation prints the replay
// command (make chaos shrinks it). The fresh seed is drawn from the tree
// under test (treeSeed: every change runs a sequence no one ran before, and
// the same tree the same one, so a failure in CI replays exactly);
// CHAOS_FRESH_SEED sets it, CHAOS_FRESH=0 leaves it out.
func TestChaosSlice(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos slice runs the built binary")
	}
	j := newJudge(t)
	j.shrink = 0
	j.features.OS = useOpenStack(t, false)
	// The fixed seeds draw as they always drew; the fresh one draws the
	// sharing Services too.
	share := useShare(t, true)
	seeds := slices.Clone(sliceSeeds)
	fresh, withFresh := sliceFreshSeed(t, j.featuresWord(Features{OS: j.features.OS, Share: share}))
	if withFresh {
		seeds = append(seeds, fresh)
	}
	t.Logf("chaos slice: seeds %v, %d steps each", seeds, sliceSteps)
	for _, seed := range seeds {
		j.features.Share = withFresh && seed == fresh && share
		j.judge(seed, sliceSteps, GenerateFor(seed, sliceSteps, j.features))
	}
}

// useShare decides whether the share stream draws (CHAOS_SHARE; byDefault
// when unset) and logs it.
func useShare(t *testing.T, byDefault bool) bool {
	on := byDefault
	switch v := os.Getenv(envShare); v {
	case "":
	case "0", "1":
		on = v == "1"
	default:
		t.Fatalf("%s=%q: want 1 (the share stream draws), 0 (it does not) or nothing (fresh seeds: it does; a seed given: as drawn before it)", envShare, v)
	}
	t.Logf("chaos: the share stream (Services sharing bare-metal addresses by allow-shared-ip keys) is %s", map[bool]string{true: "on", false: "off"}[on])
	return on
}

// useOpenStack decides whether the world has the OpenStack backend
// (CHAOS_OS; byDefault: when the stack's environment is set) and logs why
// or why not.
func useOpenStack(t *testing.T, byDefault bool) bool {
	ok, why := OpenStackAvailable()
	switch v := os.Getenv(envOS); {
	case v == "0":
		t.Logf("chaos: os is off (%s=0)", envOS)
		return false
	case v == "1" && !ok:
		t.Fatalf("%s=1 and the OpenStack stack is not here: %s", envOS, why)
	case v != "" && v != "1":
		t.Fatalf("%s=%q: want 1 (OpenStack required), 0 (left out) or nothing (make chaos: when the stack is up; the slice: left out)", envOS, v)
	case v == "" && !byDefault:
		t.Logf("chaos: os is off: the slice leaves OpenStack out unless %s=1 (a sequence with os took 1.0-2.2 minutes for 14-25 steps on a loaded 2-core machine, Octavia converging up to 78 s after the last step, and its settle bound is 5 minutes: three of 25 steps do not fit the slice's 5 minutes; make chaos runs it)", envOS)
		return false
	case !ok:
		t.Logf("chaos: os is off: %s", why)
		return false
	}
	t.Logf("chaos: os is on: the backend os on the real Keystone (%s), Octavia and Nova", os.Getenv("OS_AUTH_URL"))
	return true
}

// sliceFreshSeed is the slice's fresh seed (CHAOS_FRESH_SEED, else the
// tree's), logged with the commands that replay it; false with
// CHAOS_FRESH=0.
func sliceFreshSeed(t *testing.T, osWord string) (uint64, bool) {
	switch v := os.Getenv(envFresh); v {
	case "", "1":
	case "0":
		t.Logf("chaos slice: no fresh seed (%s=0)", envFresh)
		return 0, false
	default:
		t.Fatalf("%s=%q: want 0 (the fixed seeds alone) or 1 (one fresh seed too, the default)", envFresh, v)
	}
	from := envFreshS
	seed := envUint(t, envFreshS, 0)
	if os.Getenv(envFreshS) == "" {
		root, err := framework.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		if seed, from, err = treeSeed(root); err != nil {
			t.Fatalf("%v (set %s to a seed to run one anyway)", err, envFreshS)
		}
	}
	t.Logf("chaos slice: fresh seed %d (from %s); replay it: make chaos SEED=%d STEPS=%d%s, or make chaos-slice %s=%d",
		seed, from, seed, sliceSteps, osWord, envFreshS, seed)
	return seed, true
}

// judge runs sequences for one test and reports what they find.
type judge struct {
	t           *testing.T
	features    Features
	out         string
	shrink      time.Duration
	settle      time.Duration
	lastElapsed time.Duration
}

func newJudge(t *testing.T) *judge {
	out := os.Getenv(envOut)
	if out == "" {
		root, err := framework.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		out = filepath.Join(root, "_output", "chaos")
	}
	return &judge{t: t, out: out, shrink: envDuration(t, envShrink, 20*time.Minute), settle: envDuration(t, envSettle, settleDefault)}
}

func (j *judge) run(ctx context.Context, name string, ops []Op, keep bool) (*Result, error) {
	return Run(ctx, ops, RunOptions{Dir: RunDir(j.out, name), Keep: keep || os.Getenv(envKeep) != "", Settle: j.settle, Logf: j.t.Logf, Ignore: splitList(os.Getenv(envIgnore)), Features: j.features})
}

// judge runs ops (drawn from seed, or replayed), and on a violation
// shrinks it, writes the replay file and fails the test with the replay
// commands; it reports whether the sequence broke an invariant.
func (j *judge) judge(seed uint64, steps int, ops []Op) (failed bool) {
	t := j.t
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute+j.shrink)
	defer cancel()
	t.Logf("chaos: seed %d, %d steps (make chaos SEED=%d STEPS=%d%s)", seed, len(ops), seed, steps, j.featuresWord(j.features))
	res, err := j.run(ctx, fmt.Sprintf("seed-%d", seed), ops, false)
	if errors.Is(err, ErrMissingBinaries) {
		framework.MissingBinaries(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	j.lastElapsed = res.Elapsed
	t.Logf("seed %d: %d steps in %s (%s): %s", seed, res.Step, res.Elapsed.Round(time.Second), counts(res.Counts), verdict(res))
	if !res.Failed() {
		return false
	}
	t.Errorf("seed %d broke invariants after %d of %d steps (found in %s); logs kept in %s:\n%s\nreplay: make chaos SEED=%d STEPS=%d%s",
		seed, res.Step, len(ops), res.Found.Round(time.Second), res.Dir, describeViolations(res.Violations), seed, steps, j.featuresWord(j.features))
	if j.shrink <= 0 {
		return true
	}
	shrunk, best := j.shrinkOps(ctx, seed, ops[:res.Step], res)
	if best == nil {
		best = res
	}
	path := filepath.Join(j.out, fmt.Sprintf("replay-seed-%d-%d-steps.json", seed, len(shrunk)))
	if err := WriteReplay(path, Replay{Seed: seed, Steps: steps, Features: j.features, Violations: best.Violations, Ops: shrunk}); err != nil {
		t.Error(err)
	}
	t.Errorf("seed %d shrunk from %d to %d steps, which still break %v (logs in %s):\n%s%s\nreplay: make chaos REPLAY=%s",
		seed, len(ops), len(shrunk), best.Classes(), best.Dir, Describe(shrunk), describeViolations(best.Violations), path)
	return true
}

// shrinkOps shrinks a failing sequence within the judge's budget; ops
// already ends with the step that first failed.
func (j *judge) shrinkOps(ctx context.Context, seed uint64, ops []Op, res *Result) ([]Op, *Result) {
	s := &Shrinker{
		Classes: res.Classes(),
		Budget:  j.shrink,
		Logf:    j.t.Logf,
		Try: func(ctx context.Context, cand []Op, trial int) (*Result, error) {
			return j.run(ctx, fmt.Sprintf("seed-%d-shrink-%d", seed, trial), cand, false)
		},
	}
	ctx, cancel := context.WithTimeout(ctx, j.shrink+5*time.Minute)
	defer cancel()
	return s.Shrink(ctx, ops)
}

// featuresWord is what a replay command adds to draw the same sequence:
// the sequence depends on whether the world has OpenStack and whether the
// share stream draws.
func (j *judge) featuresWord(f Features) string {
	w := " CHAOS_OS=0"
	if f.OS {
		w = " CHAOS_OS=1"
	}
	if f.Share {
		return w + " CHAOS_SHARE=1"
	}
	return w + " CHAOS_SHARE=0"
}

func describeViolations(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "  - %s\n", v)
	}
	return b.String()
}

func verdict(r *Result) string {
	if r.Failed() {
		return fmt.Sprintf("VIOLATED %v", r.Classes())
	}
	return "no violation"
}

func counts(c map[Kind]int) string {
	var parts []string
	for k, n := range c {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func freshSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) % 1_000_000_000
}

func envUint(t *testing.T, name string, def uint64) uint64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want a whole number", name, v)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: want a duration such as 10m", name, v)
	}
	return d
}

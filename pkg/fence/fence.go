// Package fence keeps a replica that may have lost its leader-election
// lease from writing to the API server.
//
// Upstream's elector (k8s.io/client-go/tools/leaderelection) has no
// fencing: a leader paused longer than the lease duration (a stopped
// process, a frozen VM, a long garbage-collection pause) resumes still
// believing it leads, and its controllers act on what they saw before the
// pause until the elector notices, up to the renew deadline later, while
// another replica already leads: two writers. The fence closes that
// window from the side of the replica itself: a [Fence] sees the requests
// the elector makes for the lease, and refuses every other mutating
// request (POST, PUT, PATCH, DELETE) once the last successful renewal was
// sent too long ago for the replica to be sure it still holds the lease.
//
// The bound is the follower's: a standby counts the lease duration from
// the moment it observed the holder's last renewal, which is after the
// holder sent it; so no other replica can hold the lease before the
// holder's send time plus the lease duration. A write checked before that
// time (minus a margin for its transit) reaches the API server while the
// replica still holds the lease. Times are read from the monotonic clock,
// so a wall-clock jump does not move the bound.
//
// The same bound closes the cloud to the replica: [Fence.CheckCloud] is the
// gate pkg/cloudapi puts every mutating cloud call to (an NLB created, a
// target registered), so a leader resumed after its pause sends none of
// the calls it had queued, and leader migration's Lease, once this
// process has held it, bounds them too.
package fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ErrFenced is the error of every refused request (check with errors.Is:
// client-go wraps it in a *url.Error).
var ErrFenced = errors.New("refused by the leader-election fence")

// logInterval is how often at most a refused request is logged; the
// requests refused in between are counted in that line.
const logInterval = 10 * time.Second

// Options configures a Fence.
type Options struct {
	// Namespace and Name are the leader-election Lease
	// (--leader-elect-resource-namespace, --leader-elect-resource-name).
	Namespace, Name string
	// Exempt are other Leases in Namespace written by electors of this
	// process (leader migration's): their writes are passed through.
	Exempt []string
	// Migration is leader migration's Lease in Namespace ("" for none),
	// also written by an elector of this process (list it in Exempt
	// too): followed as Name is, it bounds the cloud's mutations
	// (CheckCloud) once this process has held it, for the controllers
	// it runs migrate with it.
	Migration string
	// LeaseDuration is --leader-elect-lease-duration.
	LeaseDuration time.Duration
	// Margin is taken off LeaseDuration for a write's way to the API
	// server; 0: a tenth of LeaseDuration.
	Margin time.Duration
	// Clock is the clock; nil: the real one (monotonic readings).
	Clock clock.PassiveClock
}

// Fence follows the leader-election Lease's renewals made through it and
// refuses other writes once they are too old. Its zero value is not
// usable: use [New].
type Fence struct {
	opts   Options
	bound  time.Duration
	decode runtime.Decoder

	mu sync.Mutex
	// main is the followed Lease (Options.Name), migration leader
	// migration's (Options.Migration).
	main, migration held
	// writeLog and cloudLog rate-limit the log lines of refused API
	// writes and of refused cloud mutations, each apart.
	writeLog, cloudLog logLimit
}

// logLimit rate-limits one kind of refusal's log lines: the last line's
// time, and how many refusals were not logged since.
type logLimit struct {
	lastLog  time.Time
	unlogged int
}

// held is what the fence knows of one followed Lease.
type held struct {
	// held: the last write of the Lease that succeeded named identity as
	// holder, sent at renewed, and no read of the Lease since named
	// another holder.
	held     bool
	identity string
	renewed  time.Time
	// limit is how long after renewed writes pass: the bound, or less
	// when the Lease the elector wrote says a shorter duration (it writes
	// whole seconds, rounded down, and standbys go by what it says).
	limit time.Duration
	// ever: the Lease was held once (held may have ended since).
	ever bool
	// since is when the write that made this replica the holder was
	// sent, and tookOver whether that write updated a Lease that already
	// existed (another holder, or this process's own before its hold
	// ended, may have had cloud calls on their way then).
	since    time.Time
	tookOver bool
}

// open reports how long ago the Lease's last renewal was sent and
// whether it still bounds writes in (now before renewed plus limit).
func (h *held) open(clk clock.PassiveClock) (time.Duration, bool) {
	if !h.held {
		return 0, false
	}
	age := clk.Since(h.renewed)
	return age, age < h.limit
}

// New returns a Fence for the Lease opts names; it is closed (every write
// but the Lease's is refused) until the first successful acquisition.
func New(opts Options) (*Fence, error) {
	var errs []error
	if opts.Namespace == "" || opts.Name == "" {
		errs = append(errs, fmt.Errorf("fence: the lease's namespace and name must be set (--leader-elect-resource-namespace, --leader-elect-resource-name), got %q/%q", opts.Namespace, opts.Name))
	}
	if opts.Margin == 0 {
		opts.Margin = opts.LeaseDuration / 10
	}
	if opts.LeaseDuration <= 0 || opts.Margin < 0 || opts.Margin >= opts.LeaseDuration {
		errs = append(errs, fmt.Errorf("fence: --leader-elect-lease-duration must be positive and above the margin, got %s (margin %s)", opts.LeaseDuration, opts.Margin))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("fence: %w", err)
	}
	return &Fence{
		opts:   opts,
		bound:  opts.LeaseDuration - opts.Margin,
		decode: serializer.NewCodecFactory(scheme).UniversalDeserializer(),
	}, nil
}

// CheckTimings reports whether a healthy leader can be fenced with these
// leader-election timings. The elector renews a retry period after its
// last attempt, and each attempt (a read, then the update) may take up to
// the renew deadline before it gives up; so two successful renewals can be
// sent up to retryPeriod + renewDeadline apart. When that reaches the
// fence's window (the lease duration in whole seconds, less a tenth), a
// leader whose renewals are slow but succeed has its writes refused for a
// moment each cycle: safe, but a stall. The error names the flags to
// change; the defaults (15 s, 10 s, 2 s) leave 1.5 s to spare.
func CheckTimings(leaseDuration, renewDeadline, retryPeriod time.Duration) error {
	window := time.Duration(leaseDuration/time.Second)*time.Second - leaseDuration/10
	if spread := retryPeriod + renewDeadline; spread >= window {
		return fmt.Errorf("fence: two renewals of the leader-election lease may be sent --leader-elect-retry-period + --leader-elect-renew-deadline = %s apart, which reaches the fence's window of %s (--leader-elect-lease-duration %s in whole seconds, less a tenth): a leader whose renewals are slow is refused writes for a moment each cycle; lower the retry period or the renew deadline, or raise the lease duration",
			spread, window, leaseDuration)
	}
	return nil
}

// Wrap returns rt behind the fence; it is a rest.Config's WrapTransport.
// A transport already behind this fence is returned as it is.
func (f *Fence) Wrap(rt http.RoundTripper) http.RoundTripper {
	if t, ok := rt.(*transport); ok && t.f == f {
		return rt
	}
	return &transport{f: f, next: rt}
}

// Holds reports whether the replica can be sure it holds the Lease now.
func (f *Fence) Holds() bool {
	_, _, open := f.check()
	return open
}

// TookOver returns when this replica became the holder of the
// leader-election Lease by updating a Lease that existed already, while it
// holds it (zero otherwise: it does not hold it, or it created the Lease).
// Another replica led before it then (or this one, before its hold
// ended), and cloud calls that replica sent before its hold ended may
// still land after this time: a create held on its way is the one that
// matters (cloudapi.SetTakeover).
func (f *Fence) TookOver() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.main.held || !f.main.tookOver {
		return time.Time{}
	}
	return f.main.since
}

// CheckCloud is the cloud's mutation gate (cloudapi.SetMutationGate): it
// returns nil while this replica can be sure it holds the leader-election
// Lease, by the same bound as the API server's writes (its last renewal
// sent less than the lease duration less the margin ago, and no read since
// naming another holder), and, once it has held leader migration's Lease
// (Options.Migration), that Lease too by the same rule; else an error
// wrapping ErrFenced, logged at most once every 10 s. A deposed leader's
// cloud calls so stop before another replica can start making its own:
// the bound is the earliest time a standby may take the Lease over.
func (f *Fence) CheckCloud(context.Context) error {
	f.mu.Lock()
	clk := f.opts.Clock
	age, open := f.main.open(clk)
	mainHeld, limit := f.main.held, f.main.limit
	migAge, migOpen, migHeld, migLimit := time.Duration(0), true, true, time.Duration(0)
	if f.opts.Migration != "" && f.migration.ever {
		migAge, migOpen = f.migration.open(clk)
		migHeld, migLimit = f.migration.held, f.migration.limit
	}
	f.mu.Unlock()
	lease := f.opts.Namespace + "/" + f.opts.Name
	var err error
	switch {
	case !mainHeld:
		err = fmt.Errorf("%w: this replica does not hold the leader-election lease %s", ErrFenced, lease)
	case !open:
		err = fmt.Errorf("%w: this replica sent its last renewal of the leader-election lease %s %s ago, and cloud mutations stop %s after it (less a margin of %s for the lease's duration): another replica may lead now",
			ErrFenced, lease, age.Round(time.Millisecond), limit, f.opts.Margin)
	case !migHeld:
		err = fmt.Errorf("%w: this replica held leader migration's lease %s/%s and holds it no more", ErrFenced, f.opts.Namespace, f.opts.Migration)
	case !migOpen:
		err = fmt.Errorf("%w: this replica sent its last renewal of leader migration's lease %s/%s %s ago, and cloud mutations stop %s after it: another replica may run its controllers now",
			ErrFenced, f.opts.Namespace, f.opts.Migration, migAge.Round(time.Millisecond), migLimit)
	default:
		return nil
	}
	f.logRefusal(&f.cloudLog, "Refused a cloud mutation: this replica cannot be sure it still leads", err)
	return err
}

// check returns how long ago the last renewal was sent, whether the Lease
// was held then, and whether writes may pass now.
func (f *Fence) check() (age time.Duration, held, open bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	age, open = f.main.open(f.opts.Clock)
	return age, f.main.held, open
}

// remaining is how long writes still pass, 0 when they do not.
func (f *Fence) remaining() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.main.held {
		return 0
	}
	return max(f.main.limit-f.opts.Clock.Since(f.main.renewed), 0)
}

// followed is the state of the followed Lease named name, or nil.
func (f *Fence) followed(name string) *held {
	if name == "" {
		return nil
	}
	switch name {
	case f.opts.Name:
		return &f.main
	case f.opts.Migration:
		return &f.migration
	}
	return nil
}

// wrote records a successful write of the followed Lease name sent at
// sent; update: the write updated an existing Lease (not a create).
func (f *Fence) wrote(name string, sent time.Time, lease *coordinationv1.Lease, update bool) {
	holder := holderOf(lease)
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.followed(name)
	if h == nil {
		return
	}
	if holder == "" {
		h.held = false // released
		return
	}
	if !h.held || h.identity != holder {
		h.since, h.tookOver = sent, update
	}
	if !h.held || h.identity != holder || sent.After(h.renewed) {
		h.renewed = sent
	}
	h.held, h.identity, h.ever = true, holder, true
	h.limit = f.bound
	if d := lease.Spec.LeaseDurationSeconds; d != nil {
		h.limit = min(h.limit, time.Duration(*d)*time.Second-f.opts.Margin)
	}
}

// read records a read of the followed Lease name: another holder closes
// the fence at once (for the migration Lease: to the cloud's mutations).
func (f *Fence) read(name string, lease *coordinationv1.Lease) {
	holder := holderOf(lease)
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.followed(name)
	if h != nil && h.held && holder != h.identity {
		h.held = false
		klog.InfoS("The leader-election lease has another holder: writes are refused from now on", "lease", klog.KObj(lease), "holder", holder)
	}
}

func holderOf(lease *coordinationv1.Lease) string {
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// refusal counts and logs (rate-limited) a refused request and returns its
// error.
func (f *Fence) refusal(req *http.Request, age time.Duration, held bool) error {
	refusedRequests.WithLabelValues(req.Method).Inc()
	lease := f.opts.Namespace + "/" + f.opts.Name
	f.mu.Lock()
	limit := f.main.limit
	f.mu.Unlock()
	var err error
	if held {
		err = fmt.Errorf("%w: %s %s: this replica sent its last renewal of the leader-election lease %s %s ago, and writes stop %s after it (the lease's duration, --leader-elect-lease-duration %s in whole seconds as the lease records it, less a margin of %s): another replica may lead now",
			ErrFenced, req.Method, req.URL.Path, lease, age.Round(time.Millisecond), limit, f.opts.LeaseDuration, f.opts.Margin)
	} else {
		err = fmt.Errorf("%w: %s %s: this replica does not hold the leader-election lease %s", ErrFenced, req.Method, req.URL.Path, lease)
	}
	f.logRefusal(&f.writeLog, "Refused a write: this replica cannot be sure it still leads", err)
	return err
}

// logRefusal logs a refusal, at most one line of its kind (l) every
// logInterval; the line counts the refusals not logged since the last.
func (f *Fence) logRefusal(l *logLimit, msg string, err error) {
	f.mu.Lock()
	now := f.opts.Clock.Now()
	if !l.lastLog.IsZero() && now.Sub(l.lastLog) < logInterval {
		l.unlogged++
		f.mu.Unlock()
		return
	}
	n := l.unlogged
	l.lastLog, l.unlogged = now, 0
	f.mu.Unlock()
	klog.InfoS(msg, "err", err, "refusedSinceLastLine", n)
}

// transport is a RoundTripper behind a Fence.
type transport struct {
	f    *Fence
	next http.RoundTripper
}

// RoundTrip passes reads and the Lease's own requests, and other writes
// only while the fence is open.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	f := t.f
	if name, ok := f.leaseTarget(req.URL.Path); ok {
		followed := f.followed(name) != nil
		switch {
		case req.Method == http.MethodGet && followed:
			return t.leaseRead(req, name)
		case req.Method == http.MethodPut && followed, req.Method == http.MethodPost && name == "":
			return t.leaseWrite(req, name)
		case name == f.opts.Name || slices.Contains(f.opts.Exempt, name):
			return t.next.RoundTrip(req)
		}
	}
	return t.gate(req)
}

// gate passes req unless it is a write and the fence is closed.
func (t *transport) gate(req *http.Request) (*http.Response, error) {
	if !mutating(req.Method) {
		return t.next.RoundTrip(req)
	}
	age, held, open := t.f.check()
	if open {
		return t.deadlined(req)
	}
	if req.Body != nil {
		_ = req.Body.Close() // a RoundTripper closes the body, even on errors
	}
	return nil, t.f.refusal(req, age, held)
}

// deadlined passes an admitted write with a deadline at the end of the
// fence's window: a write checked in time but held up after the check (a
// transport waiting for a connection, a process paused between the check
// and the socket) is dropped by the transport instead of reaching the API
// server after another replica may lead. The deadline is on the real
// clock (a context's is); the window's length is the fence's clock's.
func (t *transport) deadlined(req *http.Request) (*http.Response, error) {
	left := t.f.remaining()
	if left <= 0 {
		age, held, _ := t.f.check()
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, t.f.refusal(req, age, held)
	}
	ctx, cancel := context.WithTimeout(req.Context(), left)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil || resp.Body == nil {
		cancel()
		return resp, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose releases a request's context when its response's body is
// closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// leaseWrite passes a create or an update (of name) of a Lease of the
// lease namespace, and follows the followed Leases': a success sent at
// time T naming a holder opens the fence until T plus the bound.
func (t *transport) leaseWrite(req *http.Request, name string) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	lease := t.f.decodeLease(body)
	if req.Method == http.MethodPost {
		name = ""
		if lease != nil {
			name = lease.Name
		}
		if t.f.followed(name) == nil {
			if slices.Contains(t.f.opts.Exempt, name) {
				return t.next.RoundTrip(req)
			}
			return t.gate(req) // another Lease: a write as any
		}
	}
	sent := t.f.opts.Clock.Now()
	resp, err := t.next.RoundTrip(req)
	if err == nil && lease != nil && (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated) {
		t.f.wrote(name, sent, lease, req.Method != http.MethodPost)
	}
	return resp, err
}

// leaseRead passes a read of the followed Lease name and looks at its
// holder.
func (t *transport) leaseRead(req *http.Request, name string) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Body == nil {
		return resp, err
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil {
		return resp, nil // the caller's read of the body fails as it would have
	}
	if lease := t.f.decodeLease(data); lease != nil {
		t.f.read(name, lease)
	}
	return resp, nil
}

// decodeLease decodes a Lease (JSON or protobuf), or returns nil.
func (f *Fence) decodeLease(data []byte) *coordinationv1.Lease {
	var lease coordinationv1.Lease
	obj, _, err := f.decode.Decode(data, nil, &lease)
	if err != nil {
		return nil
	}
	l, _ := obj.(*coordinationv1.Lease)
	return l
}

// readBody reads req's body and puts it back for the next RoundTripper.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	data, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("fence: reading the body of %s %s: %w", req.Method, req.URL.Path, err)
	}
	req.Body = io.NopCloser(bytes.NewReader(data))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	return data, nil
}

// leaseTarget reports whether path is a Lease of the lease namespace
// (…/apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME], after any
// prefix of the server's URL) and returns NAME ("" for the collection).
func (f *Fence) leaseTarget(path string) (string, bool) {
	prefix := "/apis/" + coordinationv1.GroupName + "/v1/namespaces/" + f.opts.Namespace + "/leases"
	i := strings.LastIndex(path, prefix)
	if i < 0 {
		return "", false
	}
	rest := path[i+len(prefix):]
	switch {
	case rest == "" || rest == "/":
		return "", true
	case strings.HasPrefix(rest, "/") && !strings.Contains(rest[1:], "/"):
		return rest[1:], true
	}
	return "", false
}

// mutating reports whether method changes something on the API server.
func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

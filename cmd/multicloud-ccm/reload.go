package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// Live configuration. The process re-reads --cloud-config, and every file
// its backends reference (secret files, CA bundles, clouds.yaml), every
// --cloud-config-reload-period. It reads them by path each time, so a
// mounted Secret or ConfigMap updated by the kubelet's symlink swap is seen
// like a file rewritten in place. When their content changes, the config
// is parsed and validated and, if valid, applied without a restart (see
// router.Reloadable); if not, the configuration in use keeps serving and
// the failure is reported: a Warning event CloudConfigReloadFailed, an
// error log listing every problem with its field path, and the metrics
// below.

// Event reasons of the reloads. They are stable.
const (
	reasonReloadFailed = "CloudConfigReloadFailed"
	reasonReloaded     = "CloudConfigReloaded"
)

// defaultReloadPeriod is how often the files are checked.
const defaultReloadPeriod = 2 * time.Second

var (
	configLastReloadSuccessful = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "config",
		Name:           "last_reload_successful",
		Help:           "1 when the last attempt to apply a changed cloud-config (or a file it references) succeeded, 0 when it failed and the previous configuration is still in use.",
		StabilityLevel: metrics.ALPHA,
	})
	configLastReloadSuccess = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "config",
		Name:           "last_reload_success_timestamp_seconds",
		Help:           "When the configuration in use was applied (Unix time).",
		StabilityLevel: metrics.ALPHA,
	})
	configHash = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "config",
		Name:           "hash",
		Help:           "The first 48 bits of the SHA-256 of the configuration in use: the cloud-config file and the files it references, as an integer. The full hash is logged with every reload.",
		StabilityLevel: metrics.ALPHA,
	})
	configReloads = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "config",
		Name:           "reloads_total",
		Help:           "Attempts to apply a changed cloud-config, by result (success or failure).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	registerReloadMetrics sync.Once
)

// reloadingCloud is the provider with its configuration watcher: the
// watcher starts with Initialize, when a client for its events exists.
type reloadingCloud struct {
	*router.Reloadable
	w *watcher
}

// Our load-balancer controller asks the router which nodes a Service's
// load balancers target, to re-sync only those whose targets change.
var _ lbcontroller.Targeter = reloadingCloud{}

// And which backends target which nodes, what an ensure handed each, and
// whether a node's address change changes a backend's load balancer.
var (
	_ lbcontroller.BackendTargeter   = reloadingCloud{}
	_ lbcontroller.EnsuredTargeter   = reloadingCloud{}
	_ lbcontroller.AddressRetargeter = reloadingCloud{}
	_ lbcontroller.ServiceSyncer     = reloadingCloud{}
	_ lbcontroller.ServedReporter    = reloadingCloud{}
)

// Initialize initialises the provider and starts watching the files.
func (c reloadingCloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.Reloadable.Initialize(clientBuilder, stop)
	if client, err := clientBuilder.Client(backends.EventComponent); err != nil {
		klog.ErrorS(err, "Cannot create a client: cloud-config reloads will only be logged")
	} else {
		c.w.recorder = backends.NewEventRecorder(client, stop)
	}
	if c.w.period > 0 {
		go wait.Until(c.w.poll, c.w.period, stop)
	}
}

// watcher applies the cloud-config when it or a file it references changes.
type watcher struct {
	path   string
	period time.Duration
	rl     *router.Reloadable
	// recorder and ref receive the reload events; recorder is nil until
	// Initialize.
	recorder record.EventRecorder
	ref      *corev1.ObjectReference

	// files are the files the last parsed config references; seen is the
	// hash of the config and those files last acted on.
	files []string
	seen  string
	// cfg is the configuration in use.
	cfg *config.CloudConfig

	// mu guards listeners.
	mu sync.Mutex
	// listeners are told of every configuration applied, with the one it
	// replaced (see onApplied).
	listeners []func(prev, next *config.CloudConfig, ch router.Changes)
}

// onApplied registers f, called after every reload applied, in the
// watcher's goroutine, with the configuration replaced, the one now in use
// and what router.Reloadable.Apply changed: the load-balancer controller
// re-syncs the Services whose routing changed.
func (w *watcher) onApplied(f func(prev, next *config.CloudConfig, ch router.Changes)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.listeners = append(w.listeners, f)
}

func (w *watcher) notify(prev, next *config.CloudConfig, ch router.Changes) {
	w.mu.Lock()
	fs := slices.Clone(w.listeners)
	w.mu.Unlock()
	for _, f := range fs {
		f(prev, next, ch)
	}
}

// newReloadingCloud loads the config at path and builds the provider.
func newReloadingCloud(path string, period time.Duration) (cloudprovider.Interface, error) {
	registerReloadMetrics.Do(func() {
		legacyregistry.MustRegister(configLastReloadSuccessful, configLastReloadSuccess, configHash, configReloads)
	})
	if path == "" {
		return nil, fmt.Errorf("multicloud: --cloud-config is required: pass the path of the multicloud-ccm CloudConfig YAML file")
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, fmt.Errorf("multicloud: invalid --cloud-config %s: %w", path, err)
	}
	rl, err := router.NewReloadable(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("multicloud: %w", err)
	}
	w := &watcher{path: path, period: period, rl: rl, ref: eventObject(), files: referencedFiles(cfg), cfg: cfg}
	w.seen = w.hash(w.files)
	configLastReloadSuccessful.Set(1)
	configLastReloadSuccess.Set(float64(time.Now().Unix()))
	configHash.Set(hashValue(w.seen))
	countRetiring(rl)
	return reloadingCloud{Reloadable: rl, w: w}, nil
}

// eventObject is the object reload events are recorded on: the CCM's Pod
// when the downward API names it (POD_NAME, POD_NAMESPACE), else the
// Namespace it runs in (POD_NAMESPACE, default kube-system), which outlives
// every Pod.
func eventObject() *corev1.ObjectReference {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "kube-system"
	}
	if pod := os.Getenv("POD_NAME"); pod != "" {
		return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: pod}
	}
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: ns}
}

func referencedFiles(cfg *config.CloudConfig) []string {
	var out []string
	for _, b := range cfg.Backends {
		out = append(out, config.ReferencedFiles(b.Settings)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// hash identifies the config file and files (those it references) by
// content. A file that cannot be read counts by its error.
func (w *watcher) hash(files []string) string {
	h := sha256.New()
	for _, f := range append([]string{w.path}, files...) {
		data, err := os.ReadFile(f) //nolint:gosec // G304: the operator's --cloud-config and the files it names.
		if err != nil {
			fmt.Fprintf(h, "%s\x00error %v\x00", f, err)
			continue
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// poll applies the config if the files changed since the last attempt. A
// config that failed is not tried again until the files change again.
func (w *watcher) poll() {
	before := w.hash(w.files)
	if before == w.seen {
		return
	}
	start := time.Now()
	cfg, files, sum, err := w.load()
	if err != nil {
		// Not tried again until the files change (from what they were
		// before they were read).
		w.seen = before
		w.failed(before, err)
		return
	}
	// One edit is one reload: seen is the hash over the files the applied
	// config references, so a file the edit added is not a second change.
	w.seen, w.files = sum, files
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ch, err := w.rl.Apply(ctx, cfg)
	if err != nil {
		w.failed(sum, err)
		return
	}
	prev := w.cfg
	w.cfg = cfg
	w.applied(sum)
	klog.InfoS("Applied the changed cloud-config", "hash", sum, "duration", time.Since(start),
		"added", ch.Added, "rebuilt", ch.Rebuilt, "reconfigured", ch.Reconfigured, "retuned", ch.Retuned, "removed", ch.Removed)
	w.event(corev1.EventTypeNormal, reasonReloaded, fmt.Sprintf("Applied the changed cloud-config %s (sha256 %s): %s", w.path, sum[:12], describe(ch)))
	w.notify(prev, cfg, ch)
}

// maxLoads bounds the re-reads of a config whose referenced files keep
// changing while it is read.
const maxLoads = 3

// load parses the config and returns it with the files it references and
// the hash of the config and those files, taken before the config was
// read: a file changed while it was read changes the hash again, and the
// next poll applies once more (never less).
func (w *watcher) load() (*config.CloudConfig, []string, string, error) {
	files := w.files
	for attempt := 1; ; attempt++ {
		sum := w.hash(files)
		cfg, err := config.Load(w.path)
		if err != nil {
			return nil, nil, "", err
		}
		refs := referencedFiles(cfg)
		if slices.Equal(refs, files) || attempt == maxLoads {
			return cfg, refs, sum, nil
		}
		files = refs
	}
}

func (w *watcher) applied(sum string) {
	configLastReloadSuccessful.Set(1)
	configLastReloadSuccess.Set(float64(time.Now().Unix()))
	configHash.Set(hashValue(sum))
	configReloads.WithLabelValues("success").Inc()
}

func (w *watcher) failed(sum string, err error) {
	configLastReloadSuccessful.Set(0)
	configReloads.WithLabelValues("failure").Inc()
	problems := problemTexts(err)
	klog.ErrorS(err, "The changed cloud-config was not applied; the previous configuration stays in use",
		"file", w.path, "hash", sum, "problems", problems)
	w.event(corev1.EventTypeWarning, reasonReloadFailed, fmt.Sprintf(
		"The changed cloud-config %s was not applied; the previous configuration stays in use. Fix: %s",
		w.path, strings.Join(problems, "; ")))
}

func (w *watcher) event(typ, reason, msg string) {
	if w.recorder != nil {
		w.recorder.Event(w.ref, typ, reason, msg)
	}
}

// hashValue is the first 48 bits of a hex SHA-256, exact in a float64.
func hashValue(sum string) float64 {
	b, err := hex.DecodeString(sum[:16])
	if err != nil {
		return 0
	}
	return float64(binary.BigEndian.Uint64(b) >> 16)
}

func describe(ch router.Changes) string {
	if ch.Empty() {
		return "no backend changed"
	}
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"added", ch.Added}, {"rebuilt", ch.Rebuilt}, {"reconfigured", ch.Reconfigured}, {"retuned", ch.Retuned}, {"removed", ch.Removed}} {
		if len(p.names) > 0 {
			parts = append(parts, p.what+" "+strings.Join(p.names, ", "))
		}
	}
	return "backends " + strings.Join(parts, "; ")
}

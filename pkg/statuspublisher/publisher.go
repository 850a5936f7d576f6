// Package statuspublisher is the CCM controller that publishes each
// backend's status (type, health, what it serves, bare-metal pool usage)
// in the ConfigMap multicloud-ccm-status of the CCM's namespace, where
// `multicloud-ccm status` and anyone with read access to it find it. It
// runs in the leader only (the controller manager starts controllers once
// it leads), writes when the status changes and at most every 10 seconds,
// and makes no cloud call: the router keeps the status as its calls go.
package statuspublisher

import (
	"context"
	"fmt"
	"maps"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

const (
	// ConfigMapName is the name of the published ConfigMap.
	ConfigMapName = "multicloud-ccm-status"
	// DefaultNamespace is the ConfigMap's namespace when POD_NAMESPACE is
	// unset.
	DefaultNamespace = "kube-system"
	// NamespaceEnv names the environment variable holding the CCM's
	// namespace (the chart sets it from the Pod's).
	NamespaceEnv = "POD_NAMESPACE"
	// ManagedByLabel marks the ConfigMap as the CCM's.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// managedBy is ManagedByLabel's value.
	managedBy = "multicloud-ccm"

	// MinInterval is the shortest time between two writes.
	MinInterval = 10 * time.Second
	// pollInterval is how often the router's status is compared with what
	// was last written (in memory: no API request).
	pollInterval = time.Second
)

// Source is what the publisher publishes: the router's backends' status.
type Source interface {
	BackendStatus() []router.BackendStatus
}

// Publisher writes the backends' status to the ConfigMap.
type Publisher struct {
	client    kubernetes.Interface
	namespace string
	source    Source

	minInterval, poll time.Duration
	now               func() time.Time

	// written is the data last written (or found already there).
	written map[string]string
	// lastTry is when a write was last attempted.
	lastTry time.Time
}

// New returns a publisher writing source's status to the ConfigMap in
// namespace.
func New(client kubernetes.Interface, namespace string, source Source) *Publisher {
	return &Publisher{client: client, namespace: namespace, source: source,
		minInterval: MinInterval, poll: pollInterval, now: time.Now}
}

// Namespace is the CCM's namespace: $POD_NAMESPACE, else kube-system.
func Namespace() string {
	if ns := os.Getenv(NamespaceEnv); ns != "" {
		return ns
	}
	return DefaultNamespace
}

// Name returns the controller's name.
func (p *Publisher) Name() string { return ControllerName }

// Run publishes until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("configMap", klog.KRef(p.namespace, ConfigMapName))
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Publishing the backends' status")
	ticker := time.NewTicker(p.poll)
	defer ticker.Stop()
	for {
		if err := p.sync(ctx); err != nil {
			logger.Error(err, "Publishing the backends' status failed; retrying", "after", p.minInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// sync writes the status if it changed since the last write and the last
// attempt is at least minInterval ago.
func (p *Publisher) sync(ctx context.Context) error {
	data, err := render(p.source.BackendStatus())
	if err != nil {
		return err
	}
	now := p.now()
	if p.written != nil && maps.Equal(data, p.written) {
		return nil
	}
	if !p.lastTry.IsZero() && now.Sub(p.lastTry) < p.minInterval {
		return nil
	}
	p.lastTry = now
	if err := p.write(ctx, data); err != nil {
		return err
	}
	p.written = data
	return nil
}

// write makes the ConfigMap hold data, creating it if need be.
func (p *Publisher) write(ctx context.Context, data map[string]string) error {
	cms := p.client.CoreV1().ConfigMaps(p.namespace)
	cur, err := cms.Get(ctx, ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: ConfigMapName,
			Labels: map[string]string{ManagedByLabel: managedBy}}, Data: data}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ConfigMap %s/%s: %w", p.namespace, ConfigMapName, err)
		}
		klog.FromContext(ctx).V(2).Info("Created the status ConfigMap")
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading ConfigMap %s/%s: %w", p.namespace, ConfigMapName, err)
	}
	if maps.Equal(cur.Data, data) && cur.Labels[ManagedByLabel] == managedBy {
		return nil
	}
	next := cur.DeepCopy()
	next.Data = data
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	next.Labels[ManagedByLabel] = managedBy
	if _, err := cms.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating ConfigMap %s/%s: %w", p.namespace, ConfigMapName, err)
	}
	klog.FromContext(ctx).V(4).Info("Updated the status ConfigMap")
	return nil
}

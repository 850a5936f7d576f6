package openstack

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// events records the backend's own events on Services: those about a
// Service that is served, but not as it asks (user errors are recorded by
// the service controller from the returned error instead). The zero value
// only logs until setRecorder.
type events struct {
	mu       sync.Mutex
	recorder record.EventRecorder
	// told remembers the messages already recorded, by key, so that a
	// state that lasts is told once per process, not on every sync.
	told sync.Map
}

func (e *events) setRecorder(r record.EventRecorder) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recorder = r
}

// warnOnce logs and records a Warning event on the Service, unless the
// same key was told the same message before.
func (e *events) warnOnce(ctx context.Context, svc *corev1.Service, key, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if backends.DryRun(ctx) {
		klog.FromContext(ctx).Info(msg, "service", klog.KObj(svc), "reason", reason)
		return // nothing is written in a dry run, nor remembered as told.
	}
	if prev, loaded := e.told.Swap(key, msg); loaded && prev == msg {
		return
	}
	klog.FromContext(ctx).Info(msg, "service", klog.KObj(svc), "reason", reason)
	e.mu.Lock()
	r := e.recorder
	e.mu.Unlock()
	if r != nil {
		r.Event(svc, corev1.EventTypeWarning, reason, msg)
	}
}

// forget drops what was told under key (the state it described is over).
func (e *events) forget(key string) { e.told.Delete(key) }

// Initialize starts the recorder of the backend's own Warning events
// (a dual-stack Service served single-stack); the backend builds its
// OpenStack clients on first use.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	if c.lb == nil {
		return
	}
	client, err := clientBuilder.Client(backends.EventComponent)
	if err != nil {
		klog.Background().WithValues("backend", c.name).Error(err, "Cannot create a client for events; they will only be logged")
		return
	}
	c.lb.events.setRecorder(backends.NewEventRecorder(client, stop))
}

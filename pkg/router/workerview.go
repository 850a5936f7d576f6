package router

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// workerView is a Router as the process's workers see it (configuration).
type workerView struct{ *Router }

// WithClassDefaults is withClassDefaults.
func (v workerView) WithClassDefaults(svc *corev1.Service) *corev1.Service {
	return v.withClassDefaults(svc)
}

// EnsuredIn is ensuredIn.
func (v workerView) EnsuredIn(svc *corev1.Service) []*backend.Member { return v.ensuredIn(svc) }

// EnsuredUnpublished is ensuredUnpublished.
func (v workerView) EnsuredUnpublished(svc *corev1.Service) bool { return v.ensuredUnpublished(svc) }

// Reroute is reroute.
func (v workerView) Reroute(ctx context.Context, svc *corev1.Service) error {
	return v.reroute(ctx, svc)
}

// FinishDrains is finishDrains.
func (v workerView) FinishDrains(ctx context.Context, svc *corev1.Service) (time.Time, error) {
	return v.finishDrains(ctx, svc)
}

package baremetal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// kubeVIPValue is the kube-vip.io/loadbalancerIPs value for ips: the
// addresses comma-separated, in the Service's family order, as
// kube-vip-cloud-provider writes them.
func kubeVIPValue(ips []netip.Addr) string {
	parts := make([]string, len(ips))
	for i, ip := range ips {
		parts[i] = ip.String()
	}
	return strings.Join(parts, ",")
}

// kubeVIPRequest reads the addresses a kube-vip.io/loadbalancerIPs value
// the user wrote asks for (has: the Service carries one). Under announce:
// kube-vip (kubeVIP) that value is the Service's request: kube-vip announces
// it, so the status must show it. A value the backend wrote (marked with
// KubeVIPAnnouncedAnnotation) is no request, nor is any value without
// announce: kube-vip (it only reserves its addresses).
func kubeVIPRequest(svc *corev1.Service, kubeVIP bool) (ips []netip.Addr, has bool, err error) {
	v, ok := svc.Annotations[kubeVIPLoadBalancerIPs]
	if !kubeVIP || !ok || svc.Annotations[KubeVIPAnnouncedAnnotation] == "true" {
		return nil, false, nil
	}
	ips, err = annotation.ParseKubeVIPIPs(kubeVIPLoadBalancerIPs, v)
	return ips, true, err
}

// errKubeVIPContradicts is the error for a Service whose two requests
// differ: kube-vip would announce one while the status showed the other.
func errKubeVIPContradicts(ours, vip []netip.Addr) error {
	return fmt.Errorf("annotation %s asks for %v but annotation %s asks for %v, which kube-vip announces; make them equal or remove one", annotation.LoadBalancerIPs, ours, kubeVIPLoadBalancerIPs, vip)
}

// sameAddrs reports whether a and b hold the same addresses in any order.
func sameAddrs(a, b []netip.Addr) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(ip netip.Addr) bool { return !slices.Contains(b, ip) })
}

// announce writes the assigned addresses to the Service's
// kube-vip.io/loadbalancerIPs annotation when the backend announces through
// kube-vip and the annotation differs; a value the user wrote (without
// KubeVIPAnnouncedAnnotation) is a request, never overwritten. The service controller ensures the
// Service again on the annotation change; that call finds the annotation
// equal and writes nothing, so the two converge after one round.
func (lb *LoadBalancer) announce(ctx context.Context, svc *corev1.Service, ips []netip.Addr) error {
	if !lb.kubeVIP.Load() {
		return nil
	}
	want := kubeVIPValue(ips)
	if v, ok := svc.Annotations[kubeVIPLoadBalancerIPs]; ok && (v == want || svc.Annotations[KubeVIPAnnouncedAnnotation] != "true") {
		return nil // ours and current, or the user's own request.
	}
	if err := lb.patchKubeVIP(ctx, svc, &want); err != nil {
		return fmt.Errorf("writing annotation %s for kube-vip: %w", kubeVIPLoadBalancerIPs, err)
	}
	klog.FromContext(ctx).V(2).Info("Wrote the addresses for kube-vip", "service", klog.KObj(svc), "addresses", want)
	return nil
}

// kubeVIPAnnounced returns, under announce: kube-vip, the addresses of
// the Service's kube-vip.io/loadbalancerIPs value when the backend wrote
// it (KubeVIPAnnouncedAnnotation): kube-vip announces them until withdraw
// removes it. Without announce: kube-vip (a reload turned it off) the
// value is only a reservation, as withdraw no longer removes it.
func (lb *LoadBalancer) kubeVIPAnnounced(svc *corev1.Service) []netip.Addr {
	v, ok := svc.Annotations[kubeVIPLoadBalancerIPs]
	if !lb.kubeVIP.Load() || !ok || svc.Annotations[KubeVIPAnnouncedAnnotation] != "true" {
		return nil
	}
	var out []netip.Addr
	for _, f := range strings.Split(v, ",") {
		if ip, err := netip.ParseAddr(strings.TrimSpace(f)); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// withdraw removes the kube-vip.io/loadbalancerIPs annotation on release
// when the backend wrote it (KubeVIPAnnouncedAnnotation); a value the user
// wrote is a request, and stays. A Service already gone needs nothing.
func (lb *LoadBalancer) withdraw(ctx context.Context, svc *corev1.Service) error {
	if !lb.kubeVIP.Load() {
		return nil
	}
	if svc.Annotations[KubeVIPAnnouncedAnnotation] != "true" {
		return nil
	}
	if err := lb.patchKubeVIP(ctx, svc, nil); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing annotation %s for kube-vip: %w", kubeVIPLoadBalancerIPs, err)
	}
	klog.FromContext(ctx).V(2).Info("Removed the addresses for kube-vip", "service", klog.KObj(svc))
	return nil
}

// patchKubeVIP sets (value) or removes (nil) the annotation and its mark
// with a merge patch, which touches no other key.
func (lb *LoadBalancer) patchKubeVIP(ctx context.Context, svc *corev1.Service, value *string) error {
	if backends.DryRun(ctx) {
		what := "annotation " + kubeVIPLoadBalancerIPs + " removed"
		if value != nil {
			what = "annotation " + kubeVIPLoadBalancerIPs + "=" + *value + " written for kube-vip"
		}
		backends.RecordIntent(ctx, "patch Service", what)
		return nil
	}
	lb.srcMu.Lock()
	c := lb.client
	lb.srcMu.Unlock()
	if c == nil {
		return fmt.Errorf("the backend has no Kubernetes client (Initialize was not called)")
	}
	var mark *string
	if value != nil {
		t := "true"
		mark = &t
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		kubeVIPLoadBalancerIPs: value, KubeVIPAnnouncedAnnotation: mark,
	}}})
	if err != nil {
		return err
	}
	_, err = c.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func statusObjects() []runtime.Object {
	node := func(name, backend, providerID, zone string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}, Spec: corev1.NodeSpec{ProviderID: providerID}}
		if backend != "" {
			n.Labels["multicloud-ccm.io/backend"] = backend
		}
		if zone != "" {
			n.Labels[corev1.LabelTopologyZone] = zone
		}
		return n
	}
	svc := func(name string, ann map[string]string, class *string, ingress ...corev1.LoadBalancerIngress) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Annotations: ann},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class},
			Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: ingress}},
		}
	}
	warn := func(name, node, reason, msg string, at time.Time) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Type: corev1.EventTypeWarning,
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node}, Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(at)}
	}
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	return []runtime.Object{
		node("bm-1", "metal", "baremetal://bm-1", "rack-a"),
		node("vm-1", "onprem", "vsphere://4207-aa", "zone-a"),
		node("ip-10-0-1-5", "aws", "aws:///eu-west-1a/i-0abc", "eu-west-1a"),
		node("stray", "", "", ""),
		warn("e1", "stray", "UnclaimedNode", "old", t0),
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e0"}, Type: corev1.EventTypeNormal,
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "stray"}, Reason: "Fine", LastTimestamp: metav1.NewTime(t0.Add(time.Hour))},
		warn("e2", "stray", "UnclaimedNode", "no backend claims this node: set multicloud-ccm.io/backend", t0.Add(time.Minute)),
		svc("web", map[string]string{"multicloud-ccm.io/load-balancer-served-by": "metal"}, nil, corev1.LoadBalancerIngress{IP: "192.0.2.1"}),
		svc("shop", map[string]string{"multicloud-ccm.io/load-balancer-backend": "aws", "multicloud-ccm.io/load-balancer-served-by": "aws",
			"multicloud-ccm.io/load-balancer-id": "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/net/a1b2/c3d4"},
			nil, corev1.LoadBalancerIngress{Hostname: "a1b2.elb.eu-west-1.amazonaws.com"}),
		svc("api", map[string]string{"multicloud-ccm.io/load-balancer-served-by": "metal"}, ptr.To("multicloud-ccm.io/metal"),
			corev1.LoadBalancerIngress{IP: "192.0.2.2"}, corev1.LoadBalancerIngress{IP: "2001:db8::2"}),
		svc("pending", nil, nil),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "internal"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}},
	}
}

// TestStatusGolden: the tables, JSON and YAML of a cluster with three
// backends, a node no backend claims (its latest Warning shown), Services
// routed by default, annotation and class, one pending.
func TestStatusGolden(t *testing.T) {
	client := fake.NewClientset(statusObjects()...)
	st, err := readStatus(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"table", "json", "yaml"} {
		var out bytes.Buffer
		if err := printStatus(&out, st, format); err != nil {
			t.Fatal(err)
		}
		golden(t, filepath.Join("testdata", "status."+format), out.Bytes())
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -run %s -update to rewrite):\n%s", path, t.Name(), got)
	}
}

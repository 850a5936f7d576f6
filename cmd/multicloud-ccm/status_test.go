package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/statuspublisher"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// t0 is when the status tests' objects were written; now, when they are
// read.
var (
	t0  = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	now = t0.Add(90 * time.Second)
)

// publishedStatus is the ConfigMap the CCM publishes for the three
// backends: aws answering, onprem refusing the login, metal with a
// dual-stack pool.
func publishedStatus(t *testing.T) *corev1.ConfigMap {
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(t0.Add(d)); return &m }
	one, two := 1, 2
	bs := map[string]statuspublisher.Backend{
		"aws": {Type: "aws", Health: statuspublisher.Health{Up: true, LastSuccess: at(80 * time.Second),
			LastError: &statuspublisher.CallError{Operation: "EnsureLoadBalancer", Class: "throttled", Message: "api error Throttling: Rate exceeded", Time: *at(-time.Hour)}},
			Nodes: &one, LoadBalancers: &one},
		"onprem": {Type: "vsphere", Health: statuspublisher.Health{Up: false, LastSuccess: at(-2 * time.Hour),
			LastError: &statuspublisher.CallError{Operation: "InstanceMetadata", Class: "auth", Message: "vCenter vc1 refused the login of user \"ccm\"", Time: *at(85 * time.Second)}},
			Nodes: &one},
		"metal": {Type: "baremetal", Health: statuspublisher.Health{Up: true, LastSuccess: at(30 * time.Second)}, Nodes: &one, LoadBalancers: &two,
			Pools: []backends.PoolUsage{{Pool: "public", Family: "IPv4", Used: 2, Size: 254}, {Pool: "public", Family: "IPv6", Used: 1, Size: 1 << 16}, {Pool: "private", Family: "IPv4", Used: 0, Size: 6}}},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: statuspublisher.ConfigMapName}, Data: map[string]string{}}
	for name, b := range bs {
		out, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		cm.Data[name] = string(out)
	}
	return cm
}

// tainted taints n as a kubelet with --cloud-provider=external does.
func tainted(n *corev1.Node) *corev1.Node {
	testutil.Uninitialized(n)
	return n
}

// withPlatform annotates n with the KEP-5778 platform annotation.
func withPlatform(n *corev1.Node, platform string) *corev1.Node {
	n.Annotations = map[string]string{"cloudprovider.kubernetes.io/platform": platform}
	return n
}

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
	return []runtime.Object{
		node("bm-1", "metal", "baremetal://bm-1", "rack-a"),
		node("vm-1", "onprem", "vsphere://4207-aa", "zone-a"),
		node("ip-10-0-1-5", "aws", "aws:///eu-west-1a/i-0abc", "eu-west-1a"),
		node("stray", "", "", ""),
		node("ip-10-0-2-7", "", "aws:///eu-west-1b/i-0def", "eu-west-1b"),
		node("px-1", "", "proxmox://pve/100", ""),
		tainted(node("kind-1", "", "kind://docker/kind/kind-1", "")),
		withPlatform(node("hc-1", "", "", ""), "hcloud"),
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
// backends, a node no backend claims (its latest Warning shown), nodes of
// other CCMs (issue 45: an initialised proxmox:// node, one annotated with
// the KEP-5778 platform hcloud: "left to the CCM of platform ..."; a
// tainted kind:// node is not, for the CCM decides it by nodes.unmanaged
// unless its platforms are declared, which status cannot see), an AWS node not
// labelled by us (initialised by upstream's AWS CCM before the switch: a
// platform we serve, so ours), Services routed by default, annotation and
// class, one pending.
func TestStatusGolden(t *testing.T) {
	client := fake.NewClientset(append(statusObjects(), publishedStatus(t))...)
	st, err := readStatus(context.Background(), client, "kube-system")
	if err != nil {
		t.Fatal(err)
	}
	if st.note != "" {
		t.Errorf("note %q with the status published", st.note)
	}
	for _, format := range []string{"table", "json", "yaml"} {
		var out bytes.Buffer
		if err := printStatus(&out, st, format, now); err != nil {
			t.Fatal(err)
		}
		golden(t, filepath.Join("testdata", "status."+format), out.Bytes())
	}
}

// TestStatusUnpublished: without the published ConfigMap (or in another
// namespace, or unreadable) the objects are shown, the health unknown, and
// a note says why.
func TestStatusUnpublished(t *testing.T) {
	forbidden := fake.NewClientset(statusObjects()...)
	forbidden.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, statuspublisher.ConfigMapName, errors.New("RBAC"))
	})
	broken := publishedStatus(t)
	broken.Data["aws"] = "{"
	cases := []struct {
		name, namespace, note string
		client                *fake.Clientset
	}{
		{"absent", "kube-system", "Health unknown: no ConfigMap kube-system/multicloud-ccm-status", fake.NewClientset(statusObjects()...)},
		{"elsewhere", "ccm-system", "Health unknown: no ConfigMap ccm-system/multicloud-ccm-status", fake.NewClientset(append(statusObjects(), publishedStatus(t))...)},
		{"forbidden", "kube-system", "Health unknown: reading ConfigMap kube-system/multicloud-ccm-status is forbidden", forbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := readStatus(context.Background(), tc.client, tc.namespace)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(st.note, tc.note) {
				t.Errorf("note %q, want it to start %q", st.note, tc.note)
			}
			if len(st.Backends) != 3 || st.Backends[0].Health != nil || st.Backends[0].Nodes != 1 || len(st.Pools) != 0 {
				t.Errorf("backends %+v, pools %+v; want 3 counted from the objects, health and pools unknown", st.Backends, st.Pools)
			}
			for _, n := range st.Nodes {
				if n.OtherCCM != "" {
					t.Errorf("node %s left to the CCM of platform %s, though the platforms served are not known", n.Name, n.OtherCCM)
				}
			}
		})
	}
	_, err := readStatus(context.Background(), fake.NewClientset(broken), "kube-system")
	if err == nil || !strings.Contains(err.Error(), "key aws") {
		t.Errorf("a published value that does not decode: %v, want an error naming its key", err)
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	testutil.Golden(t, path, got, *update)
}

// TestStatusSeveralBackends: a Service served by two backends has a row
// per backend, each with its own load-balancer ID and state; a Service
// moving off a backend shows that backend draining until its drain ends;
// the STATE column appears only then, and a draining load balancer is not
// counted as served.
func TestStatusSeveralBackends(t *testing.T) {
	until := t0.Add(5 * time.Minute)
	svc := func(name string, ann map[string]string, ingress ...string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Annotations: ann},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		for _, in := range ingress {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: in})
		}
		return s
	}
	client := fake.NewClientset(
		svc("both", map[string]string{"multicloud-ccm.io/load-balancer-backend": "metal,aws", "multicloud-ccm.io/load-balancer-served-by": "metal,aws",
			"multicloud-ccm.io/load-balancer-id": "aws=arn:aws:elasticloadbalancing:eu-west-1:1:loadbalancer/net/b/1"}, "192.0.2.1", "10.1.1.1"),
		svc("moving", map[string]string{"multicloud-ccm.io/load-balancer-backend": "aws", "multicloud-ccm.io/load-balancer-served-by": "aws",
			"multicloud-ccm.io/load-balancer-id":       "arn:aws:elasticloadbalancing:eu-west-1:1:loadbalancer/net/m/2",
			"multicloud-ccm.io/load-balancer-draining": "metal=" + until.Format(time.RFC3339)}, "10.1.1.2"),
	)
	st, err := readStatus(context.Background(), client, "kube-system")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printStatus(&out, st, "table", now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"aws       shop/both     annotation   192.0.2.1,10.1.1.1   arn:aws:elasticloadbalancing:eu-west-1:1:loadbalancer/net/b/1   serving",
		"aws       shop/moving   annotation   10.1.1.2             arn:aws:elasticloadbalancing:eu-west-1:1:loadbalancer/net/m/2   serving",
		"metal     shop/both     annotation   192.0.2.1,10.1.1.1   -                                                               serving",
		"metal     shop/moving   annotation   10.1.1.2             -                                                               draining until 2026-11-25T10:05:00Z (3m30s left)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	served := map[string]int{}
	for _, b := range st.Backends {
		served[b.Name] = b.LoadBalancers
	}
	if served["aws"] != 2 || served["metal"] != 1 {
		t.Errorf("load balancers served = %v, want aws 2, metal 1 (a draining one is not served)", served)
	}
}

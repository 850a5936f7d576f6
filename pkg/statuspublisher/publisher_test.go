package statuspublisher

import (
	"context"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// source is a Source whose status the test sets.
type source struct {
	mu  sync.Mutex
	sts []router.BackendStatus
}

func (s *source) BackendStatus() []router.BackendStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sts
}

func (s *source) set(sts []router.BackendStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sts = sts
}

func intp(n int) *int { return &n }

// demoStatus is three backends as the demo runs them: an AWS backend that
// answers, a vSphere backend refusing the credentials, and a bare-metal
// backend with a dual-stack pool.
func demoStatus() []router.BackendStatus {
	return []router.BackendStatus{
		{Name: "aws", Type: "aws", Up: true, LastSuccess: t0.Add(-3 * time.Second), Nodes: intp(2), LoadBalancers: intp(1)},
		{Name: "onprem", Type: "vsphere", Up: false, LastSuccess: t0.Add(-time.Hour),
			LastError: &router.CallError{Operation: "InstanceMetadata", Class: "auth", Time: t0.Add(-5 * time.Second),
				Message: "vCenter vc1: logging in: ServerFaultCode: Cannot complete login due to an incorrect user name or password."},
			Nodes: intp(1)},
		{Name: "metal", Type: "baremetal", Up: true, Nodes: intp(0), LoadBalancers: intp(2), Pools: []backends.PoolUsage{
			{Pool: "public", Family: "IPv4", Used: 2, Size: 254}, {Pool: "public", Family: "IPv6", Used: 1, Size: ^uint64(0)}}},
	}
}

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newPublisher(client *fake.Clientset, src Source, c *clock) *Publisher {
	p := New(client, "ccm-system", src)
	p.now = c.now
	return p
}

// writes counts the ConfigMap creates and updates.
func writes(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "configmaps" && (a.GetVerb() == "create" || a.GetVerb() == "update") {
			n++
		}
	}
	return n
}

func getCM(t *testing.T, client *fake.Clientset) *corev1.ConfigMap {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps("ccm-system").Get(context.Background(), ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// TestPublishGolden: the ConfigMap as created, one key per backend, its
// status as JSON (the example in docs/routing.md).
func TestPublishGolden(t *testing.T) {
	client := fake.NewClientset()
	p := newPublisher(client, &source{sts: demoStatus()}, &clock{t: t0})
	if err := p.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	cm := getCM(t, client)
	cm.ResourceVersion, cm.ManagedFields = "", nil
	out, err := yaml.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "configmap.yaml"), out)
}

// TestPublishOnChangeAtMostEvery10s: nothing unchanged is written again; a
// change is written at once when the last write is 10 s old, else when it
// becomes so; a failed write is retried no sooner.
func TestPublishOnChangeAtMostEvery10s(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	src := &source{sts: demoStatus()}
	c := &clock{t: t0}
	p := newPublisher(client, src, c)
	step := func(d time.Duration, want int, what string) {
		t.Helper()
		c.t = c.t.Add(d)
		if err := p.sync(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := writes(client); got != want {
			t.Fatalf("%s: %d writes, want %d", what, got, want)
		}
	}
	step(0, 1, "first sync")
	step(20*time.Second, 1, "nothing changed")
	changed := demoStatus()
	changed[0].LastSuccess = c.t
	src.set(changed)
	step(0, 2, "a change, the last write 20 s ago")
	changed = demoStatus()
	changed[2].Pools[0].Used = 3
	src.set(changed)
	step(5*time.Second, 2, "a change 5 s after the last write")
	step(4*time.Second, 2, "9 s after the last write")
	step(time.Second, 3, "10 s after the last write")
	if got := getCM(t, client).Data["metal"]; !contains(got, `"used": 3`) {
		t.Errorf("metal = %s, want the pool's new usage", got)
	}

	client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcdserver: request timed out")
	})
	changed[1].Up = true
	src.set(changed)
	c.t = c.t.Add(10 * time.Second)
	if err := p.sync(ctx); err == nil || !contains(err.Error(), "updating ConfigMap ccm-system/multicloud-ccm-status") {
		t.Fatalf("a failed update: %v, want the ConfigMap named", err)
	}
	client.ReactionChain = client.ReactionChain[1:]
	before := writes(client)
	step(5*time.Second, before, "5 s after the failure")
	step(5*time.Second, before+1, "10 s after the failure")
}

// TestPublishOverExisting: a ConfigMap already holding the same status (a
// new leader's start) is not written; another's content is replaced, its
// other labels kept; a backend removed by a reload goes.
func TestPublishOverExisting(t *testing.T) {
	ctx := context.Background()
	data, err := render(demoStatus())
	if err != nil {
		t.Fatal(err)
	}
	same := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ccm-system", Name: ConfigMapName,
		Labels: map[string]string{ManagedByLabel: managedBy, "team": "infra"}}, Data: data}
	client := fake.NewClientset(same)
	src := &source{sts: demoStatus()}
	p := newPublisher(client, src, &clock{t: t0})
	if err := p.sync(ctx); err != nil || writes(client) != 0 {
		t.Fatalf("same content: %v, %d writes; want none", err, writes(client))
	}
	src.set(demoStatus()[:2])
	p.now = func() time.Time { return t0.Add(time.Minute) }
	if err := p.sync(ctx); err != nil || writes(client) != 1 {
		t.Fatalf("a backend removed: %v, %d writes; want 1", err, writes(client))
	}
	cm := getCM(t, client)
	if _, ok := cm.Data["metal"]; ok || len(cm.Data) != 2 || cm.Labels["team"] != "infra" {
		t.Errorf("after the reload: data keys %v, labels %v; want aws and onprem, the team label kept", sortedKeys(cm.Data), cm.Labels)
	}
}

// TestDecode reads back what is published (sizes up to 2^64-1 intact) and
// names the key of a value that does not decode.
func TestDecode(t *testing.T) {
	data, err := render(demoStatus())
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: ConfigMapName}, Data: data}
	got, err := Decode(cm)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Name != "aws" || got[1].Name != "metal" || got[2].Name != "onprem" {
		t.Fatalf("decoded %+v, want aws, metal, onprem", got)
	}
	if p := got[1].Pools[1]; p.Size != ^uint64(0) || p.Family != "IPv6" {
		t.Errorf("IPv6 pool = %+v, want size 2^64-1", p)
	}
	if e := got[2].Health.LastError; e == nil || e.Class != "auth" || !e.Time.Equal(&metav1.Time{Time: t0.Add(-5 * time.Second)}) {
		t.Errorf("onprem's last error = %+v", e)
	}
	cm.Data["broken"] = "{"
	if _, err := Decode(cm); err == nil || !contains(err.Error(), "ConfigMap kube-system/multicloud-ccm-status, key broken") {
		t.Errorf("Decode of a broken value: %v, want the key named", err)
	}
}

// TestNamespace: POD_NAMESPACE, else kube-system.
func TestNamespace(t *testing.T) {
	t.Setenv(NamespaceEnv, "")
	if got := Namespace(); got != DefaultNamespace {
		t.Errorf("unset: %q, want %q", got, DefaultNamespace)
	}
	t.Setenv(NamespaceEnv, "ccm-system")
	if got := Namespace(); got != "ccm-system" {
		t.Errorf("set: %q, want ccm-system", got)
	}
}

// TestRun: Run publishes at once and stops with its context.
func TestRun(t *testing.T) {
	client := fake.NewClientset()
	p := New(client, "ccm-system", &source{sts: demoStatus()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for writes(client) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if writes(client) != 1 {
		t.Errorf("%d writes, want 1", writes(client))
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	testutil.Golden(t, path, got, *update)
}

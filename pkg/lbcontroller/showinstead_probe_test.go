package lbcontroller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fakecloud "k8s.io/cloud-provider/fake"
)

// TestProbeNoWriteBringsBackDeletedVIP (review probe, session 56; passes:
// pins down write 2 after showInstead, 7514778): a Service moved off os
// (a delete that takes a while) to metal with no drain. Every version of
// the Service the API server stores is watched: once one shows metal's
// address without os's VIP (the router's write before the delete), no
// later one, while os's load balancer is being deleted and after, shows
// the VIP again: the controller's write 2, from the copy it synced (which
// showed the VIP), and the failed syncs' writes, put nothing of it back.
func TestProbeNoWriteBringsBackDeletedVIP(t *testing.T) {
	slow := &slowDeleteLB{Cloud: &fakecloud.Cloud{DisableInstances: true, DisableRoutes: true}, held: map[types.UID]bool{}, deleting: map[types.UID]bool{}}
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, build: withSlowDelete(slow)})
	if got := webOn(t, e, "os", "0s"); got != slowVIP {
		t.Fatalf("web on os shows %q, want %s", got, slowVIP)
	}
	uid := e.get(t, "web").UID

	w, err := e.client.CoreV1().Services("default").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var (
		mu       sync.Mutex
		versions []string
	)
	go func() {
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*corev1.Service); ok && s.Name == "web" {
				mu.Lock()
				versions = append(versions, ingresses(s))
				mu.Unlock()
			}
		}
	}()

	e.moveTo(t, "web", "metal")
	eventually(t, "os's delete accepted", func() error {
		if !slow.isDeleting(uid) {
			return fmt.Errorf("%s", state(e.get(t, "web")))
		}
		return nil
	})
	time.Sleep(time.Second) // syncs retried while os's delete is under way
	slow.finish()
	eventually(t, "os's delete over", func() error {
		if slow.holds(uid) {
			return fmt.Errorf("os still holds it: %s", state(e.get(t, "web")))
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	moved := -1
	for i, v := range versions {
		if moved < 0 && strings.HasPrefix(v, "192.0.2.") && !strings.Contains(v, slowVIP) {
			moved = i
		}
		if moved >= 0 && strings.Contains(v, slowVIP) {
			t.Fatalf("version %d of web shows %s again after version %d had it out: %q", i, slowVIP, moved, versions)
		}
	}
	if moved < 0 {
		t.Fatalf("no version showed metal's address without the VIP: %q", versions)
	}
}

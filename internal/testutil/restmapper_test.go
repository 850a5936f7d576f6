package testutil

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestShareRESTMapper: clientsets sharing the one mapper still map each
// resource to its kind and track the fields each write sets.
func TestShareRESTMapper(t *testing.T) {
	ctx := context.Background()
	for range 2 {
		client := ShareRESTMapper(fake.NewClientset())
		svc, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"k": "v"}}}, metav1.CreateOptions{FieldManager: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Kind != "Service" || len(svc.ManagedFields) != 1 || svc.ManagedFields[0].Manager != "test" {
			t.Errorf("created Service: kind %q, managed fields %+v", svc.Kind, svc.ManagedFields)
		}
		cm, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{FieldManager: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Kind != "ConfigMap" || len(cm.ManagedFields) != 1 {
			t.Errorf("created ConfigMap: kind %q, managed fields %+v", cm.Kind, cm.ManagedFields)
		}
	}
}

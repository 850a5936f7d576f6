package providerid

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid/scheme"
)

// TestScheme: Scheme is scheme.Of, whose tests give the cases.
func TestScheme(t *testing.T) {
	for _, id := range []string{"aws:///us-east-1a/i-1", "baremetal://bm-1", "", "bm-1", "AWS:///us-east-1a/i-1", "baremetal://"} {
		got, err := Scheme(id)
		want, wantErr := scheme.Of(id)
		if got != want || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Errorf("Scheme(%q) = %q, %v; scheme.Of gives %q, %v", id, got, err, want, wantErr)
		}
	}
}

func TestNodePlatform(t *testing.T) {
	node := func(id string, ann map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: ann}, Spec: corev1.NodeSpec{ProviderID: id}}
	}
	tests := []struct {
		name string
		node *corev1.Node
		want string
	}{
		{"providerID scheme", node("aws:///us-east-1a/i-1", nil), "aws"},
		{"providerID wins over the annotation", node("vsphere://4237", map[string]string{PlatformAnnotation: "aws"}), "vsphere"},
		{"annotation without providerID", node("", map[string]string{PlatformAnnotation: "hcloud"}), "hcloud"},
		{"nothing", node("", nil), ""},
		{"malformed providerID", node("bm-1", map[string]string{PlatformAnnotation: "aws"}), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodePlatform(tc.node); got != tc.want {
				t.Errorf("NodePlatform = %q, want %q", got, tc.want)
			}
		})
	}
}

package router

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestWithRecordOf: the copy a controller keeps gains every backend a
// later record names, never loses one, and is not changed in place.
func TestWithRecordOf(t *testing.T) {
	withRecord := func(rec *string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"user": "kept"}}}
		if rec != nil {
			s.Annotations[string(annotation.LoadBalancerBackends)] = *rec
		}
		return s
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name          string
		served, later *string
		want          *string
		sameCopyKept  bool
	}{
		{name: "a move's new backend added", served: str("metal"), later: str("aws,metal"), want: str("aws,metal")},
		{name: "a backend dropped since is kept", served: str("aws,metal"), later: str("aws"), want: str("aws,metal"), sameCopyKept: true},
		{name: "nothing new", served: str("metal"), later: str("metal"), want: str("metal"), sameCopyKept: true},
		{name: "an emptied record adds nothing", served: str("metal"), later: str(""), want: str("metal"), sameCopyKept: true},
		{name: "no record later", served: str("metal"), later: nil, want: str("metal"), sameCopyKept: true},
		{name: "no record served: the later one's", served: nil, later: str("aws"), want: str("aws")},
		{name: "no record at all", served: nil, later: nil, want: nil, sameCopyKept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			served := withRecord(tc.served)
			before := served.DeepCopy()
			got := WithRecordOf(served, withRecord(tc.later))
			if rec, ok := got.Annotations[string(annotation.LoadBalancerBackends)]; ok != (tc.want != nil) || ok && rec != *tc.want {
				t.Errorf("record %q (set %v), want %v", rec, ok, tc.want)
			}
			if got.Annotations["user"] != "kept" {
				t.Errorf("other annotations lost: %v", got.Annotations)
			}
			if (got == served) != tc.sameCopyKept {
				t.Errorf("same copy returned: %v, want %v", got == served, tc.sameCopyKept)
			}
			if served.Annotations[string(annotation.LoadBalancerBackends)] != before.Annotations[string(annotation.LoadBalancerBackends)] {
				t.Errorf("served changed in place")
			}
		})
	}
}

package lbcontroller

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// startAWSWith is startAWS with objs in the API server before the
// controller starts (a new leader's first look at them).
func startAWSWith(t *testing.T, objs ...*corev1.Service) *env {
	t.Helper()
	running, vpcID := runAWSFake(t)
	o := envOptions{doc: fmt.Sprintf(awsConfig, running.URL, vpcID), classless: true, versioned: true}
	o.wrap = func(h *hookedCloud) Cloud { return routerTargets{h} }
	list := make([]runtime.Object, 0, len(objs))
	for _, s := range objs {
		list = append(list, s)
	}
	return startEnv(t, o, list...)
}

// TestDeletedNLBCleanupAfterFailover (chaos seed 586911784): a classless
// Service our controller served on AWS (the shared finalizer, which our
// controller put, the router's record made for no class, the NLB's name
// in its status) is deleted; the replica that cleaned it up deleted the
// NLB, then lost the lease (paused, or killed) before it could remove the
// finalizer. The new leader finds no NLB any more: the name in the status
// is still the one our AWS backend gave it, and its deletion completes.
// The cleanup took that name for another controller's address (upstream's
// NLB), kept the shared finalizer and dropped the record: the Service
// stayed Terminating, with nobody to remove the finalizer.
func TestDeletedNLBCleanupAfterFailover(t *testing.T) {
	s := service("web", nil)
	s.Finalizers = []string{sharedFinalizer}
	s.Annotations = map[string]string{
		string(annotation.LoadBalancerBackend):     "aws",
		string(annotation.LoadBalancerBackends):    "aws",
		string(annotation.LoadBalancerServedBy):    "aws",
		string(annotation.LoadBalancerRecordClass): "",
	}
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "k8s-default-web-0123456789-000000000000000b.elb.eu-west-1.amazonaws.com"}}
	now := metav1.Now()
	s.DeletionTimestamp = &now
	e := startAWSWith(t, s)
	eventually(t, "the Service deleted", func() error {
		if s := getOrGone(t, e, "web"); s != nil {
			return fmt.Errorf("still there: finalizers %v, status %q, record %q", s.Finalizers, ingresses(s), s.Annotations[string(annotation.LoadBalancerBackends)])
		}
		return nil
	})
}

// TestDeletedNLBKeepsSharedBesideOurFinalizer: the same Service, but
// carrying our Finalizer beside the shared one and a record made for one
// of our classes: it was ours under a class and turned classless while our
// CCM was down, and the shared finalizer was put by the controller that
// served it since (upstream's, whose NLB the status shows). Ours goes, the
// shared one stays.
func TestDeletedNLBKeepsSharedBesideOurFinalizer(t *testing.T) {
	for name, tc := range map[string]struct {
		fins        []string
		recordClass string
	}{
		"our finalizer beside":    {[]string{Finalizer, sharedFinalizer}, ""},
		"record made for a class": {[]string{sharedFinalizer}, awsIPClass},
	} {
		t.Run(name, func(t *testing.T) {
			s := service("web", nil)
			s.Finalizers = tc.fins
			s.Annotations = map[string]string{
				string(annotation.LoadBalancerBackends):    "aws",
				string(annotation.LoadBalancerServedBy):    "aws",
				string(annotation.LoadBalancerRecordClass): tc.recordClass,
			}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "theirs-0123.elb.eu-west-1.amazonaws.com"}}
			now := metav1.Now()
			s.DeletionTimestamp = &now
			e := startAWSWith(t, s)
			eventually(t, "the record gone", func() error {
				s := getOrGone(t, e, "web")
				if s == nil {
					return nil // the check below reports it
				}
				if hasRecord(s) || hasFinalizer(s, Finalizer) {
					return fmt.Errorf("finalizers %v, annotations %v", s.Finalizers, s.Annotations)
				}
				return nil
			})
			if s := getOrGone(t, e, "web"); s == nil || !slices.Equal(s.Finalizers, []string{sharedFinalizer}) {
				t.Errorf("web: %v; want it kept by the shared finalizer alone, for the other controller's NLB", describeFinalizers(s))
			}
			if err := keptEvery(e, "web", sharedFinalizer); err != nil {
				t.Error(err)
			}
		})
	}
}

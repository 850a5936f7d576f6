package lbcontroller

import (
	"testing"
	"time"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestProbe57EnsuredFingerprintWithAHandedOverBackend (review of 58d491a,
// ImplementedElsewhere): a Service named to aws and counta with
// aws-load-balancer-type: external; the aws backend leaves its load
// balancer to the AWS Load Balancer Controller (ImplementedElsewhere,
// handed nodes all the same), counta serves. The fingerprint taken from
// what the sync handed is targetsOf's, and counta was asked once per node.
func TestProbe57EnsuredFingerprintWithAHandedOverBackend(t *testing.T) {
	e, _ := startCountingWithAWS(t)
	a := countBackend(t, countAIP)
	e.create(t, utilt.NewService("web",
		utilt.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws,counta"),
		utilt.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-type", "external"),
		utilt.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-nlb-target-type", "ip")))
	waitFor(t, time.Minute, "web served by counta", synced(e, t, "web", 1))
	quietFor(t, "web", a)
	onePass(t, a, "counta", "web", 0)
	sameFingerprint(t, e, "web")
}

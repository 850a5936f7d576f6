package openstack

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// lostCreateWindow is how long after a create whose answer was lost the
// load balancer it asked for may still appear in Octavia: a request held
// on its way (a proxy, a congested API) up to twice the request timeout.
const lostCreateWindow = requestTimeout

// lostCreates remembers, per cluster and Service, the creates whose answer
// was lost (a timeout, a broken connection, a gateway's 5xx): Octavia may
// have made the load balancer, or may make it later when the request lands
// at last, and its create names no idempotency key to look it up by
// before it shows. For the process, not for a configuration: a reload that
// rebuilds the backend keeps it (chaos seeds 417057952, 586911786).
var lostCreates sync.Map // lostKey → time.Time: until when it may land

type lostKey struct{ cluster, service string }

func (l *LoadBalancer) lostKey(svc *corev1.Service) lostKey {
	return lostKey{cluster: l.clusterID, service: svc.Namespace + "/" + svc.Name}
}

// answerLost reports whether a failed create may have been made all the
// same: no HTTP answer came (a timeout, a reset, a canceled context), or a
// 500, 502 or 504 (a server or gateway failing after the request reached
// Octavia). A 503 or a 4xx is Octavia (or the gateway) refusing it, and a
// connection never made (refused, no such host) sent nothing; nor did a
// create the mutation gate refused (cloudapi.ErrMutationRefused: this
// replica may no longer lead).
func answerLost(err error) bool {
	if errors.Is(err, cloudapi.ErrMutationRefused) {
		return false
	}
	var dial *net.OpError
	if errors.As(err, &dial) && dial.Op == "dial" {
		return false
	}
	var code gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &code) {
		return true
	}
	switch code.Actual {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// createLost remembers that the Service's create may still land.
func (l *LoadBalancer) createLost(svc *corev1.Service) {
	lostCreates.Store(l.lostKey(svc), time.Now().Add(l.window()))
}

// createLanded forgets a lost create: the Service's load balancer is seen.
func (l *LoadBalancer) createLanded(svc *corev1.Service) {
	lostCreates.Delete(l.lostKey(svc))
}

// mayStillLand returns until when a load balancer of the Service not found
// may still appear (zero: it may not): a lost create of this process's
// (pendingCreate), or, for a replica that took over from another leader
// a moment ago, one the previous leader sent before its hold of the lease
// ended (cloudapi.LandingAfterTakeover: this process cannot know of it,
// chaos seed 556087352; sent or given up within requestTimeout of its
// gate's check, before the takeover, then landing up to window later). A get and a delete that find nothing ask it: saying
// "none" there ends the Service's record in this backend, and nothing
// would look again. Ensure asks pendingCreate alone: a second load
// balancer made beside a create of the previous leader's is seen by the
// next Ensure, which deletes the duplicate.
func (l *LoadBalancer) mayStillLand(svc *corev1.Service) time.Time {
	if until := l.pendingCreate(svc); !until.IsZero() {
		return until
	}
	return cloudapi.LandingAfterTakeover(requestTimeout + l.window())
}

// window is how long a create whose answer was lost may still land.
func (l *LoadBalancer) window() time.Duration {
	if l.lostWindow == 0 {
		return lostCreateWindow
	}
	return l.lostWindow
}

// pendingCreate returns until when a lost create of the Service may still
// land (zero: none), forgetting one whose window passed.
func (l *LoadBalancer) pendingCreate(svc *corev1.Service) time.Time {
	k := l.lostKey(svc)
	v, ok := lostCreates.Load(k)
	if !ok {
		return time.Time{}
	}
	until, _ := v.(time.Time)
	if !time.Now().Before(until) {
		lostCreates.CompareAndDelete(k, v)
		return time.Time{}
	}
	return until
}

// waitLostCreate is the retry while a lost create may still land: nothing
// of the Service's is found, but saying so (a delete done, nothing to
// converge) could leave the load balancer the create makes later behind,
// paid for and unknown, or make a second one.
func (l *LoadBalancer) waitLostCreate(svc *corev1.Service, until time.Time) error {
	return l.retry("a create of load balancer %s whose answer was lost (by this replica, or by the leader before a takeover) may still land in Octavia; looking again until %s", l.lbName(svc), until.UTC().Format(time.RFC3339))
}

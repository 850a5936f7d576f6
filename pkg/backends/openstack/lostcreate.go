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
	window := l.lostWindow
	if window == 0 {
		window = lostCreateWindow
	}
	lostCreates.Store(l.lostKey(svc), time.Now().Add(window))
}

// createLanded forgets a lost create: the Service's load balancer is seen.
func (l *LoadBalancer) createLanded(svc *corev1.Service) {
	lostCreates.Delete(l.lostKey(svc))
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
	return l.retry("the create of load balancer %s lost its answer and may still land in Octavia; looking again until %s", l.lbName(svc), until.UTC().Format(time.RFC3339))
}

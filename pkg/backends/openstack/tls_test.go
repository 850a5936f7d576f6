package openstack

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

const (
	tlsContainerID = "c0000000-0000-4000-8000-000000000001"
	tlsMissingID   = "c0000000-0000-4000-8000-000000000002"
)

// TestTLSListeners: default-tls-container-ref makes TERMINATED_HTTPS
// listeners with HTTP pools (PROXY pools with proxy-protocol, the
// X-Forwarded-For header with x-forwarded-for) carrying the reference; a
// changed reference is a listener update; the reference's form depends on
// the container store; UDP ports are refused.
func TestTLSListeners(t *testing.T) {
	ref := "https://barbican.example.com:9311/v1/containers/" + tlsContainerID
	d := defaultSettingsForTest()
	for _, tt := range []struct {
		name  string
		annos map[annotation.Name]string
		want  string
	}{
		{"tls", map[annotation.Name]string{AnnotationDefaultTLSContainerRef: ref}, "TERMINATED_HTTPS HTTP false " + ref},
		{"tls and xff", map[annotation.Name]string{AnnotationDefaultTLSContainerRef: ref, AnnotationXForwardedFor: "true"}, "TERMINATED_HTTPS HTTP true " + ref},
		{"tls and proxy", map[annotation.Name]string{AnnotationDefaultTLSContainerRef: ref, AnnotationProxyProtocol: "v2"}, "TERMINATED_HTTPS PROXYV2 false " + ref},
	} {
		svc := newService("x")
		svc.Annotations = annotations(tt.annos)
		o, err := parseOptions(svc, d)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		ls, err := desiredListeners(svc, []*corev1.Node{newNode("n1", withInternalIP("10.0.0.1"))}, o)
		if err != nil {
			t.Fatal(err)
		}
		w := &ls[0]
		opts := listenerCreateOpts(w)
		if got := fmt.Sprintf("%s %s %v %s", opts.Protocol, w.poolProtocol, opts.InsertHeaders[headerXForwardedFor] == "true", opts.DefaultTlsContainerRef); got != tt.want {
			t.Errorf("%s: listener %s, want %s", tt.name, got, tt.want)
		}
		have := listenerFromSpec(w)
		if u, _ := listenerUpdate(&have, w); u != nil {
			t.Errorf("%s: a listener as created needs an update: %+v", tt.name, u)
		}
		have.DefaultTlsContainerRef = "https://barbican.example.com:9311/v1/containers/" + tlsMissingID
		if u, fields := listenerUpdate(&have, w); u == nil || *u.DefaultTlsContainerRef != ref || strings.Join(fields, ",") != "TLS container" {
			t.Errorf("%s: a changed reference: update %+v %v, want the reference set", tt.name, u, fields)
		}
	}
	for _, tt := range []struct {
		store, value, want string
	}{
		{tlsStoreBarbican, "my-cert", "must be a Barbican container or secret URL"},
		{tlsStoreBarbican, "https://b/v1/orders/" + tlsContainerID, "must be a Barbican container or secret URL"},
		{tlsStoreBarbican, "https://b/v1/secrets/xyz", "must be a Barbican container or secret URL"},
		{tlsStoreExternal, "a b", "without spaces"},
		{tlsStoreExternal, strings.Repeat("x", 256), "at most 255"},
	} {
		d := defaultSettingsForTest()
		d.TLSContainerStore = tt.store
		_, err := parseOptions(newService("x", withAnnotation(AnnotationDefaultTLSContainerRef, tt.value)), d)
		if err == nil || !strings.Contains(err.Error(), string(AnnotationDefaultTLSContainerRef)) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s store, %q: error %v, want one naming the annotation and %q", tt.store, tt.value, err, tt.want)
		}
	}
	d.TLSContainerStore = tlsStoreExternal
	if o, err := parseOptions(newService("x", withAnnotation(AnnotationDefaultTLSContainerRef, "my-cert")), d); err != nil || o.tlsRef != "my-cert" {
		t.Errorf("external store: %+v, %v; want the reference as given", o, err)
	}
	_, err := parseOptions(newService("x", withPort(corev1.ProtocolUDP, 53, 30053), withAnnotation(AnnotationDefaultTLSContainerRef, ref)), defaultSettingsForTest())
	if err == nil || !strings.Contains(err.Error(), "port 53 is UDP") {
		t.Errorf("TLS on a UDP port: %v", err)
	}
}

// fakeBarbican answers GET /v1/containers/<id> for the one container it
// holds, 404 for any other; it counts the reads.
func fakeBarbican(t *testing.T) (*httptest.Server, *int) {
	reads := new(int)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*reads++
		if r.Method != http.MethodGet || r.Header.Get("X-Auth-Token") == "" {
			t.Errorf("Barbican: %s %s without a token or not a GET", r.Method, r.URL.Path)
		}
		if r.URL.Path == "/v1/containers/"+tlsContainerID {
			writeJSON(w, http.StatusOK, map[string]any{"container_ref": "http://" + r.Host + r.URL.Path, "name": "web", "type": "certificate", "status": "ACTIVE", "secret_refs": []any{}})
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "title": "Not Found", "description": "Secrets container not found."})
	}))
	t.Cleanup(srv.Close)
	return srv, reads
}

// TestServiceControllerTLS drives the upstream service controller on the
// real Octavia (which has no Barbican of its own here) for a live Service:
// a reference Barbican does not hold, and a malformed one, give a Warning
// event and change nothing; one Barbican holds passes the backend's check
// and reaches Octavia, whose API validation refuses it (it cannot read the
// certificate) — an OctaviaRefusedAnnotation event naming the annotation;
// removing the annotation converges the same load balancer to TCP.
func TestServiceControllerTLS(t *testing.T) {
	t.Parallel()
	barbican, reads := fakeBarbican(t)
	e := newSvcEnv(t, func(s *Settings) { s.Endpoints.KeyManager = barbican.URL + "/" }, readyNode("n1", "10.24.0.1", nil))
	svc := newService("tls")
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, newService("tls")) })
	e.apply(t, svc)
	tcp := "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1"
	lb := e.waitDetail(t, svc, tcp, statusIP(corev1.LoadBalancerIPModeVIP))

	before := len(e.octavia.Writes())
	for _, tt := range []struct{ ref, reason, want string }{
		{"https://barbican/v1/containers/" + tlsMissingID, reasonTLSContainer, "Barbican has no such container"},
		{"web-cert", annotation.ReasonInvalid, "must be a Barbican container or secret URL"},
	} {
		e.apply(t, newService("tls", withAnnotation(AnnotationDefaultTLSContainerRef, tt.ref)))
		waitWarning(t, e, "tls", tt.reason, string(AnnotationDefaultTLSContainerRef), tt.want)
		if w := e.octavia.Writes()[before:]; len(w) != 0 {
			t.Fatalf("%s: Octavia changed: %q", tt.ref, w)
		}
	}
	if *reads == 0 {
		t.Error("the missing container was never looked up in Barbican")
	}

	e.apply(t, newService("tls", withAnnotation(AnnotationDefaultTLSContainerRef, barbican.URL+"/v1/containers/"+tlsContainerID)))
	waitWarning(t, e, "tls", reasonOctaviaRefused, string(AnnotationDefaultTLSContainerRef), "TERMINATED_HTTPS:80 created")
	e.apply(t, newService("tls"))
	got := e.waitDetail(t, svc, tcp, statusIP(corev1.LoadBalancerIPModeVIP))
	if got.ID != lb.ID || got.VipAddress != lb.VipAddress {
		t.Errorf("load balancer %s (VIP %s), want %s (VIP %s) kept", got.ID, got.VipAddress, lb.ID, lb.VipAddress)
	}
}

// waitWarning waits for a Warning event on the Service with the reason,
// containing every one of wants.
func waitWarning(t *testing.T, e *svcEnv, name, reason string, wants ...string) {
	t.Helper()
	eventuallyOn(t, 120*time.Second, "a "+reason+" event", func() error {
	events:
		for _, w := range e.warnings(t, name) {
			if !strings.HasPrefix(w, reason+": ") {
				continue
			}
			for _, want := range wants {
				if !strings.Contains(w, want) {
					continue events
				}
			}
			t.Logf("event %s", w)
			return nil
		}
		return fmt.Errorf("no %s event containing %q: %q", reason, wants, e.warnings(t, name))
	})
}

// listenerFromSpec is the listener Octavia reports after creating w.
func listenerFromSpec(w *listenerSpec) listeners.Listener {
	o := listenerCreateOpts(w)
	return listeners.Listener{
		Protocol: string(o.Protocol), ProtocolPort: o.ProtocolPort, ConnLimit: *o.ConnLimit, AllowedCIDRs: o.AllowedCIDRs,
		TimeoutClientData: *o.TimeoutClientData, TimeoutMemberConnect: *o.TimeoutMemberConnect, TimeoutMemberData: *o.TimeoutMemberData,
		TimeoutTCPInspect: *o.TimeoutTCPInspect, InsertHeaders: o.InsertHeaders, DefaultTlsContainerRef: o.DefaultTlsContainerRef,
	}
}

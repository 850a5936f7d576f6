package openstack

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// statusIP checks the status carries one address with the given ipMode.
func statusIP(mode corev1.LoadBalancerIPMode) func(corev1.LoadBalancerStatus) error {
	return func(st corev1.LoadBalancerStatus) error {
		if len(st.Ingress) != 1 || st.Ingress[0].IP == "" || st.Ingress[0].Hostname != "" {
			return fmt.Errorf("status %+v: want one address", st)
		}
		if st.Ingress[0].IPMode == nil || *st.Ingress[0].IPMode != mode {
			return fmt.Errorf("status %+v: want ipMode %s", st, mode)
		}
		return nil
	}
}

func statusHostname(h string) func(corev1.LoadBalancerStatus) error {
	return func(st corev1.LoadBalancerStatus) error {
		if len(st.Ingress) != 1 || st.Ingress[0].Hostname != h || st.Ingress[0].IP != "" {
			return fmt.Errorf("status %+v: want only hostname %s", st, h)
		}
		return nil
	}
}

// TestServiceControllerOCCMAnnotations drives the upstream service
// controller over the router against the real Octavia through a Service's
// life: created with OCCM's listener, pool, monitor and node annotations,
// each changed, then all removed; each time Octavia converges in place
// (the load balancer is never replaced) and the status follows.
func TestServiceControllerOCCMAnnotations(t *testing.T) {
	t.Parallel()
	e := newSvcEnv(t, nil,
		readyNode("n1", "10.20.0.1", map[string]string{"env": "prod", "gpu": "a100"}),
		readyNode("n2", "10.20.0.2", map[string]string{"env": "dev"}))
	steps := []struct {
		name   string
		annos  map[annotation.Name]string
		want   string
		status func(corev1.LoadBalancerStatus) error
	}{
		{
			name: "create", annos: map[annotation.Name]string{
				AnnotationConnectionLimit: "100", AnnotationTimeoutClientData: "10000", AnnotationTimeoutMemberConnect: "3000",
				AnnotationTimeoutMemberData: "20000", AnnotationTimeoutTCPInspect: "500", AnnotationLBMethod: "LEAST_CONNECTIONS",
				AnnotationHealthMonitorDelay: "7", AnnotationHealthMonitorTimeout: "4", AnnotationHealthMonitorMaxRetries: "2",
				AnnotationHealthMonitorMaxRetriesDown: "5", AnnotationNodeSelector: "env=prod, gpu", AnnotationProxyProtocol: "v2",
			},
			want:   "TCP/80 conn=100 t=10000/3000/20000/500 xff= pool=PROXYV2:LEAST_CONNECTIONS monitor=TCP:7/4/2/5 members=n1",
			status: statusIP(corev1.LoadBalancerIPModeProxy),
		},
		{
			name: "change", annos: map[annotation.Name]string{
				AnnotationConnectionLimit: "200", AnnotationTimeoutClientData: "11000", AnnotationTimeoutMemberConnect: "3100",
				AnnotationTimeoutMemberData: "21000", AnnotationTimeoutTCPInspect: "600", AnnotationLBMethod: "SOURCE_IP",
				AnnotationHealthMonitorDelay: "9", AnnotationHealthMonitorTimeout: "6", AnnotationHealthMonitorMaxRetries: "4",
				AnnotationHealthMonitorMaxRetriesDown: "8", AnnotationNodeSelector: "env", AnnotationProxyProtocol: "true",
			},
			want:   "TCP/80 conn=200 t=11000/3100/21000/600 xff= pool=PROXY:SOURCE_IP monitor=TCP:9/6/4/8 members=n1,n2",
			status: statusIP(corev1.LoadBalancerIPModeProxy),
		},
		{
			name:   "x-forwarded-for and hostname",
			annos:  map[annotation.Name]string{AnnotationXForwardedFor: "true", AnnotationHostname: "web.example.com", AnnotationHealthMonitor: "false"},
			want:   "HTTP/80 conn=-1 t=50000/5000/50000/0 xff=true pool=HTTP:ROUND_ROBIN members=n1,n2",
			status: statusHostname("web.example.com"),
		},
		{
			name:   "all removed",
			annos:  map[annotation.Name]string{},
			want:   "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1,n2",
			status: statusIP(corev1.LoadBalancerIPModeVIP),
		},
	}
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, newService("occm")) })
	var lbID, vip string
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			svc := newService("occm")
			svc.Annotations = annotations(st.annos)
			e.apply(t, svc)
			lb := e.waitDetail(t, svc, st.want, st.status)
			if lbID == "" {
				lbID, vip = lb.ID, lb.VipAddress
			}
			if lb.ID != lbID || lb.VipAddress != vip {
				t.Errorf("load balancer %s (VIP %s), want %s (VIP %s) converged in place", lb.ID, lb.VipAddress, lbID, vip)
			}
		})
	}
	lbCreates := 0
	for _, w := range e.octavia.Writes() {
		if w == "POST /v2.0/lbaas/loadbalancers" || w == "DELETE /v2.0/lbaas/loadbalancers/{id}" {
			lbCreates++
		}
	}
	if lbCreates != 1 {
		t.Errorf("%d load balancer creates/deletes, want the one create: %q", lbCreates, e.octavia.Writes())
	}
}

// TestServiceControllerBadOCCMAnnotation: bad values on a live Service give
// one Warning event naming every bad annotation, and nothing changes in
// Octavia.
func TestServiceControllerBadOCCMAnnotation(t *testing.T) {
	t.Parallel()
	e := newSvcEnv(t, nil, readyNode("n1", "10.21.0.1", nil))
	svc := newService("bad")
	e.apply(t, svc)
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, newService("bad")) })
	want := "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1"
	e.waitDetail(t, svc, want, statusIP(corev1.LoadBalancerIPModeVIP))
	before := len(e.octavia.Writes())

	bad := map[annotation.Name]string{
		AnnotationConnectionLimit: "0", AnnotationLBMethod: "FASTEST", AnnotationTimeoutClientData: "-5",
		AnnotationHealthMonitorMaxRetriesDown: "11", AnnotationProxyProtocol: "v3", AnnotationNodeSelector: "=x",
		AnnotationHostname: "not a host", AnnotationFlavorID: "small", AnnotationAvailabilityZone: " ",
	}
	svc.Annotations = annotations(bad)
	e.apply(t, svc)
	eventuallyOn(t, 30*time.Second, "a Warning event naming every bad annotation", func() error {
		for _, w := range e.warnings(t, "bad") {
			if !strings.HasPrefix(w, annotation.ReasonInvalid+": ") {
				continue
			}
			var missing []string
			for k := range bad {
				if !strings.Contains(w, string(k)) {
					missing = append(missing, string(k))
				}
			}
			if len(missing) == 0 {
				return nil
			}
			return fmt.Errorf("event %q does not name %v", w, missing)
		}
		return fmt.Errorf("no %s event: %q", annotation.ReasonInvalid, e.warnings(t, "bad"))
	})
	if got, _, err := detail(e.cloud, svc); err != nil || got != want {
		t.Errorf("Octavia changed by bad annotations:\n%s\nwant\n%s", got, want)
	}
	if w := e.octavia.Writes()[before:]; len(w) != 0 {
		t.Errorf("bad annotations made mutating calls: %q", w)
	}
}

// TestProxyAndXFFRefused: proxy-protocol with
// x-forwarded-for, or either on a UDP port, is refused naming them.
func TestProxyAndXFFRefused(t *testing.T) {
	for _, tt := range []struct {
		name  string
		svc   *corev1.Service
		wants []string
	}{
		{"both", newService("both", withAnnotation(AnnotationProxyProtocol, "v1"), withAnnotation(AnnotationXForwardedFor, "true")), []string{string(AnnotationXForwardedFor), string(AnnotationProxyProtocol)}},
		{"udp", newService("udp", withPort(corev1.ProtocolUDP, 53, 30053), withAnnotation(AnnotationProxyProtocol, "v2")), []string{string(AnnotationProxyProtocol), "port 53 is UDP"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseOptions(tt.svc, defaultSettingsForTest())
			for _, w := range tt.wants {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v: want one naming %q", err, w)
				}
			}
		})
	}
}

func defaultSettingsForTest() *LoadBalancerSettings {
	s := &LoadBalancerSettings{VIPSubnetID: VIPSubnetForTests}
	s.setDefaults()
	return s
}

// TestParseOCCMAnnotations checks each annotation's accepted values and
// defaults.
func TestParseOCCMAnnotations(t *testing.T) {
	d := defaultSettingsForTest()
	o, err := parseOptions(newService("x"), d)
	if err != nil {
		t.Fatal(err)
	}
	if o.connLimit != -1 || o.timeouts != (listenerTimeouts{50000, 5000, 50000, 0}) || o.method != "ROUND_ROBIN" || o.proxy != "" || o.retriesDown != 3 {
		t.Errorf("defaults %+v", o)
	}
	for _, tt := range []struct {
		key   annotation.Name
		value string
		check func(*lbOptions) bool
	}{
		{AnnotationLBMethod, "SOURCE_IP_PORT", func(o *lbOptions) bool { return o.method == "SOURCE_IP_PORT" }},
		{AnnotationProxyProtocol, "true", func(o *lbOptions) bool { return o.proxy == "PROXY" }},
		{AnnotationProxyProtocol, "v1", func(o *lbOptions) bool { return o.proxy == "PROXY" }},
		{AnnotationProxyProtocol, "v2", func(o *lbOptions) bool { return o.proxy == "PROXYV2" }},
		{AnnotationProxyProtocol, "false", func(o *lbOptions) bool { return o.proxy == "" }},
		{AnnotationConnectionLimit, "-1", func(o *lbOptions) bool { return o.connLimit == -1 }},
		{AnnotationConnectionLimit, "5000", func(o *lbOptions) bool { return o.connLimit == 5000 }},
		{AnnotationTimeoutTCPInspect, "86400000", func(o *lbOptions) bool { return o.timeouts.tcpInspect == 86400000 }},
		{AnnotationNodeSelector, "a=b,c", func(o *lbOptions) bool { return len(o.nodeSelector) == 2 && o.nodeSelector["a"] == "b" }},
		{AnnotationFlavorID, "4ef2a1d3-8a4c-4a8b-9a0f-1b2c3d4e5f60", func(o *lbOptions) bool { return o.flavorID == "4ef2a1d3-8a4c-4a8b-9a0f-1b2c3d4e5f60" }},
		{AnnotationAvailabilityZone, "az-1", func(o *lbOptions) bool { return o.availabilityZone == "az-1" }},
		{AnnotationPortID, "4ef2a1d3-8a4c-4a8b-9a0f-1b2c3d4e5f60", func(o *lbOptions) bool { return o.portID != "" }},
		{AnnotationFloatingSubnetID, "4ef2a1d3-8a4c-4a8b-9a0f-1b2c3d4e5f60", func(o *lbOptions) bool { return o.floatingSubnet.id != "" }},
		{AnnotationXForwardedFor, "true", func(o *lbOptions) bool { return o.xForwardedFor }},
		{AnnotationHostname, "a.example.com", func(o *lbOptions) bool { return o.hostname == "a.example.com" }},
	} {
		o, err := parseOptions(newService("x", withAnnotation(tt.key, tt.value)), d)
		if err != nil || !tt.check(o) {
			t.Errorf("%s=%q: %+v, %v", tt.key, tt.value, o, err)
		}
	}
	for _, tt := range []struct {
		key   annotation.Name
		value string
	}{
		{AnnotationConnectionLimit, "0"}, {AnnotationConnectionLimit, "-2"}, {AnnotationTimeoutMemberData, "86400001"},
		{AnnotationHealthMonitorMaxRetriesDown, "0"}, {AnnotationProxyProtocol, "yes"}, {AnnotationNodeSelector, "a=b=c"},
		{AnnotationLoadBalancerID, "lb-1"}, {AnnotationXForwardedFor, "on"},
		// Neutron refuses these floating IPs (Octavia these VIPs) on every
		// retry, after the load balancer is made: refused before.
		{annotation.LoadBalancerIPs, "0.0.0.0"}, {annotation.LoadBalancerIPs, "127.0.0.1"},
		{annotation.LoadBalancerIPs, "lb.example.com"}, {annotation.LoadBalancerIPs, "192.0.2.1,192.0.2.2"},
		{annotation.LoadBalancerIPs, ""},
	} {
		_, err := parseOptions(newService("x", withAnnotation(tt.key, tt.value)), d)
		if err == nil || !strings.Contains(err.Error(), string(tt.key)) {
			t.Errorf("%s=%q: error %v, want one naming the annotation", tt.key, tt.value, err)
		}
	}
}

// TestUnusableSpecLoadBalancerIP: spec.loadBalancerIP 0.0.0.0 (which the
// API server accepts) is a user error naming the field; the annotation,
// when set, wins over it.
func TestUnusableSpecLoadBalancerIP(t *testing.T) {
	d := defaultSettingsForTest()
	for _, tt := range []struct {
		spec, ann string
		bad       bool
	}{
		{spec: "0.0.0.0", bad: true},
		{spec: "224.0.0.1", bad: true},
		{spec: "192.0.2.10"},
		{spec: "0.0.0.0", ann: "192.0.2.10"},
	} {
		svc := newService("x")
		svc.Spec.LoadBalancerIP = tt.spec
		if tt.ann != "" {
			svc.Annotations = map[string]string{string(annotation.LoadBalancerIPs): tt.ann}
		}
		_, err := parseOptions(svc, d)
		_, user := backends.AsUserError(err)
		if tt.bad != (err != nil) || (err != nil && (!user || !strings.Contains(err.Error(), "spec.loadBalancerIP"))) {
			t.Errorf("spec %q, annotation %q: error %v; want bad=%v, a user error naming spec.loadBalancerIP", tt.spec, tt.ann, err, tt.bad)
		}
	}
}

// TestBadOCCMAnnotationsAllReported: every bad value is in one user error
// with the shared reason, each naming its annotation.
func TestBadOCCMAnnotationsAllReported(t *testing.T) {
	bad := map[annotation.Name]string{
		AnnotationConnectionLimit: "0", AnnotationLBMethod: "FASTEST", AnnotationTimeoutClientData: "-5",
		AnnotationHealthMonitorMaxRetriesDown: "11", AnnotationProxyProtocol: "v3", AnnotationNodeSelector: "=x",
		AnnotationHostname: "not a host", AnnotationFlavorID: "small", AnnotationAvailabilityZone: " ",
		AnnotationInternal: "1", AnnotationPortID: "port-1",
	}
	svc := newService("x")
	svc.Annotations = annotations(bad)
	_, err := parseOptions(svc, defaultSettingsForTest())
	ue, ok := backends.AsUserError(err)
	if !ok || ue.Reason != annotation.ReasonInvalid {
		t.Fatalf("error %v: want a user error with reason %s", err, annotation.ReasonInvalid)
	}
	for k, v := range bad {
		if want := fmt.Sprintf("annotation %s=%q", k, v); !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// TestNodeSelector keeps only the nodes carrying every selected label.
func TestNodeSelector(t *testing.T) {
	nodes := []*corev1.Node{readyNode("a", "10.0.0.1", map[string]string{"env": "prod", "gpu": ""}), readyNode("b", "10.0.0.2", map[string]string{"env": "prod"}), readyNode("c", "10.0.0.3", nil)}
	var got []string
	for _, n := range selectNodes(nodes, map[string]string{"env": "prod", "gpu": ""}) {
		got = append(got, n.Name)
	}
	if !slices.Equal(got, []string{"a"}) {
		t.Errorf("selected %v, want [a]", got)
	}
	if len(selectNodes(nodes, nil)) != 3 {
		t.Error("no selector must keep every node")
	}
}

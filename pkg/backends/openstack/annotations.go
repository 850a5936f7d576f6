package openstack

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Service annotations of the OpenStack backend. The names are part of the
// user-facing API and never change; docs/openstack.md lists them.
const (
	// AnnotationInternal (bool, default false): the load balancer gets no
	// floating IP; its status carries the VIP address.
	AnnotationInternal = "openstack.multicloud-ccm.io/internal"

	// AnnotationFloatingNetworkID (string, default: the backend's
	// loadBalancer.floatingNetworkID): the external network the floating IP
	// comes from. Setting it on a Service gives it a floating IP even when
	// the backend has no default floating network.
	AnnotationFloatingNetworkID = "openstack.multicloud-ccm.io/floating-network-id"

	// AnnotationKeepFloatingIP (bool, default false): on delete, the floating
	// IP is only disassociated and stays in the project, instead of being
	// released.
	AnnotationKeepFloatingIP = "openstack.multicloud-ccm.io/keep-floating-ip"

	// AnnotationVIPSubnetID (string, default: loadBalancer.vipSubnetID): the
	// subnet of the VIP. Read when the load balancer is created.
	AnnotationVIPSubnetID = "openstack.multicloud-ccm.io/vip-subnet-id"

	// AnnotationVIPNetworkID (string, default: loadBalancer.vipNetworkID): the
	// network of the VIP, when no VIP subnet is set. Read at creation.
	AnnotationVIPNetworkID = "openstack.multicloud-ccm.io/vip-network-id"

	// AnnotationMemberSubnetID (string, default: loadBalancer.memberSubnetID,
	// else the VIP subnet): the subnet members are reached through.
	AnnotationMemberSubnetID = "openstack.multicloud-ccm.io/member-subnet-id"

	// AnnotationLBMethod (string, default ROUND_ROBIN): the pools' algorithm,
	// one of ROUND_ROBIN, LEAST_CONNECTIONS, SOURCE_IP.
	AnnotationLBMethod = "openstack.multicloud-ccm.io/lb-method"

	// AnnotationHealthMonitor (bool, default: loadBalancer.createMonitor):
	// whether pools get a health monitor. With externalTrafficPolicy: Local
	// it is an HTTP check of /healthz on the Service's healthCheckNodePort;
	// otherwise a TCP (UDP-CONNECT, SCTP) check of the NodePort.
	AnnotationHealthMonitor = "openstack.multicloud-ccm.io/health-monitor"

	// AnnotationHealthMonitorDelay (int seconds, default:
	// loadBalancer.monitorDelaySeconds): interval between checks.
	AnnotationHealthMonitorDelay = "openstack.multicloud-ccm.io/health-monitor-delay"

	// AnnotationHealthMonitorTimeout (int seconds, default:
	// loadBalancer.monitorTimeoutSeconds): time a check may take; at most the
	// delay.
	AnnotationHealthMonitorTimeout = "openstack.multicloud-ccm.io/health-monitor-timeout"

	// AnnotationHealthMonitorMaxRetries (int 1-10, default:
	// loadBalancer.monitorMaxRetries): failed checks before a member is down.
	AnnotationHealthMonitorMaxRetries = "openstack.multicloud-ccm.io/health-monitor-max-retries"
)

// Event reason for a bad OpenStack annotation.
const reasonInvalidAnnotation = "InvalidOpenStackAnnotation"

// lbOptions are a Service's load-balancer choices after defaults.
type lbOptions struct {
	internal          bool
	floatingNetworkID string
	keepFloatingIP    bool
	vipSubnetID       string
	vipNetworkID      string
	memberSubnetID    string
	method            string
	monitor           bool
	delay             int
	timeout           int
	retries           int
}

func annotationError(key, value, want string) error {
	return backends.NewUserError(reasonInvalidAnnotation, fmt.Errorf("annotation %s=%q: %s", key, value, want))
}

// parseOptions reads a Service's annotations over the backend's defaults.
// A bad value is a user error naming the annotation and the fix.
func parseOptions(svc *corev1.Service, d *LoadBalancerSettings) (*lbOptions, error) {
	a := svc.Annotations
	o := &lbOptions{
		floatingNetworkID: d.FloatingNetworkID, vipSubnetID: d.VIPSubnetID, vipNetworkID: d.VIPNetworkID,
		memberSubnetID: d.MemberSubnetID, method: "ROUND_ROBIN", monitor: *d.CreateMonitor,
		delay: d.MonitorDelaySeconds, timeout: d.MonitorTimeoutSeconds, retries: d.MonitorMaxRetries,
	}
	var errs []error
	collect := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	collect(boolAnnotation(a, AnnotationInternal, &o.internal))
	collect(boolAnnotation(a, AnnotationKeepFloatingIP, &o.keepFloatingIP))
	collect(boolAnnotation(a, AnnotationHealthMonitor, &o.monitor))
	collect(idAnnotation(a, AnnotationFloatingNetworkID, &o.floatingNetworkID))
	collect(idAnnotation(a, AnnotationVIPSubnetID, &o.vipSubnetID))
	collect(idAnnotation(a, AnnotationVIPNetworkID, &o.vipNetworkID))
	collect(idAnnotation(a, AnnotationMemberSubnetID, &o.memberSubnetID))
	collect(intAnnotation(a, AnnotationHealthMonitorDelay, 1, 3600, &o.delay))
	collect(intAnnotation(a, AnnotationHealthMonitorTimeout, 1, 3600, &o.timeout))
	collect(intAnnotation(a, AnnotationHealthMonitorMaxRetries, 1, 10, &o.retries))
	collect(methodAnnotation(a, &o.method))
	if o.timeout > o.delay {
		collect(annotationError(AnnotationHealthMonitorTimeout, strconv.Itoa(o.timeout), fmt.Sprintf("must not exceed the delay (%d); lower it or raise %s", o.delay, AnnotationHealthMonitorDelay)))
	}
	if _, set := a[AnnotationVIPSubnetID]; set {
		if _, net := a[AnnotationVIPNetworkID]; !net {
			o.vipNetworkID = ""
		}
	}
	if len(errs) > 0 {
		return nil, joinUserErrors(errs)
	}
	return o, nil
}

// joinUserErrors keeps the user-error marking of a list of user errors.
func joinUserErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	msg := errs[0].Error()
	for _, e := range errs[1:] {
		msg += "; " + e.Error()
	}
	return backends.NewUserError(reasonInvalidAnnotation, fmt.Errorf("%s", msg))
}

func boolAnnotation(a map[string]string, key string, out *bool) error {
	v, ok := a[key]
	if !ok {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return annotationError(key, v, `must be "true" or "false"`)
	}
	*out = b
	return nil
}

func intAnnotation(a map[string]string, key string, lo, hi int, out *int) error {
	v, ok := a[key]
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return annotationError(key, v, fmt.Sprintf("must be a whole number from %d to %d", lo, hi))
	}
	*out = n
	return nil
}

func idAnnotation(a map[string]string, key string, out *string) error {
	v, ok := a[key]
	if !ok {
		return nil
	}
	if !uuidRE.MatchString(v) {
		return annotationError(key, v, "must be an OpenStack ID (a UUID); find it with `openstack network list` or `openstack subnet list`")
	}
	*out = v
	return nil
}

func methodAnnotation(a map[string]string, out *string) error {
	v, ok := a[AnnotationLBMethod]
	if !ok {
		return nil
	}
	switch v {
	case "ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP":
		*out = v
		return nil
	}
	return annotationError(AnnotationLBMethod, v, "must be ROUND_ROBIN, LEAST_CONNECTIONS or SOURCE_IP")
}

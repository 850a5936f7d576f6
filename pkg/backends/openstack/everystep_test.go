package openstack

import (
	"slices"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestEveryStepListsEveryChange: a plan (the dry run's everyStep) lists
// every change a listener needs (its connection limit, its pool's
// algorithm, a member, its monitor's retries), in the order converge makes
// them one per call, where converge itself (nextStep) starts with the
// first; a monitor whose type changes is deleted, then created.
func TestEveryStepListsEveryChange(t *testing.T) {
	w := listenerSpec{
		protocol: "TCP", poolProtocol: "TCP", port: 80, method: "ROUND_ROBIN", connLimit: -1,
		members: []memberSpec{{name: "n1", address: "10.0.0.1", port: 30080}, {name: "n2", address: "10.0.0.2", port: 30080}},
		monitor: &monitorSpec{typ: "TCP", delay: 5, timeout: 3, retries: 1, retriesDown: 3},
	}
	ls := listeners.Listener{ID: "l1", Protocol: "TCP", ProtocolPort: 80, DefaultPoolID: "p1", ConnLimit: 100}
	st := &lbState{listeners: []listeners.Listener{ls}, pools: map[string]*poolState{"p1": {
		pool:    pools.Pool{ID: "p1", Protocol: "TCP", LBMethod: "LEAST_CONNECTIONS"},
		members: []pools.Member{{Name: "n1", Address: "10.0.0.1", ProtocolPort: 30080}},
		monitor: &monitors.Monitor{ID: "m1", Type: "TCP", Delay: 5, Timeout: 3, MaxRetries: 3, MaxRetriesDown: 3},
	}}}
	lb := &loadbalancers.LoadBalancer{ID: "lb1"}
	whats := func(steps []*step) []string {
		var out []string
		for _, s := range steps {
			out = append(out, s.what(false))
		}
		return out
	}
	want := []string{
		"listener TCP:80 updated (connection limit)",
		"listener TCP:80: pool algorithm changed from LEAST_CONNECTIONS to ROUND_ROBIN",
		"listener TCP:80: member 10.0.0.2:30080 added",
		"health monitor of listener TCP:80 updated (max_retries 3 -> 1)",
	}
	if got := whats(everyStep(nil, lb, st, []listenerSpec{w})); !slices.Equal(got, want) {
		t.Errorf("everyStep:\n%q\nwant\n%q", got, want)
	}
	if got := nextStep(nil, lb, st, []listenerSpec{w}); got == nil || got.what(false) != want[0] {
		t.Errorf("nextStep %v, want the first change, %q", got, want[0])
	}

	st.pools["p1"].monitor.Type = "HTTP"
	got := whats(everyStep(nil, lb, st, []listenerSpec{w}))
	if want := []string{"health monitor of listener TCP:80 deleted (HTTP)", "health monitor of listener TCP:80 created"}; !slices.Equal(got[len(got)-2:], want) {
		t.Errorf("everyStep with the monitor's type changed ends %q, want %q", got, want)
	}
}

// TestEveryStepListsAListenerReplaced: a listener whose protocol changes
// (X-Forwarded-For makes TCP:80 HTTP:80) is planned as converge makes it,
// one call each: its pool deleted, then the listener, then the new
// listener, standing for the pool, members and monitor converge then
// makes under it (as a new load balancer's listeners are listed); a
// listener on a new port likewise. The switch's calls on the real Octavia
// (test/e2e/planswitch, case os-xff) are these.
func TestEveryStepListsAListenerReplaced(t *testing.T) {
	members := []memberSpec{{name: "n1", address: "10.0.0.1", port: 30080}, {name: "n2", address: "10.0.0.2", port: 30080}}
	monitor := &monitorSpec{typ: "TCP", delay: 5, timeout: 3, retries: 1, retriesDown: 3}
	want := []listenerSpec{
		{protocol: "HTTP", poolProtocol: "HTTP", port: 80, method: "ROUND_ROBIN", connLimit: -1, xForwardedFor: true, members: members, monitor: monitor},
		{protocol: "TCP", poolProtocol: "TCP", port: 443, method: "ROUND_ROBIN", connLimit: -1, members: members},
	}
	st := &lbState{listeners: []listeners.Listener{{ID: "l1", Protocol: "TCP", ProtocolPort: 80, DefaultPoolID: "p1", ConnLimit: -1}}, pools: map[string]*poolState{"p1": {
		pool: pools.Pool{ID: "p1", Protocol: "TCP", LBMethod: "ROUND_ROBIN"},
	}}}
	var got []string
	for _, s := range everyStep(nil, &loadbalancers.LoadBalancer{ID: "lb1"}, st, want) {
		got = append(got, s.what(false))
	}
	if want := []string{
		"pool p1 of unused listener TCP:80 deleted",
		"unused listener TCP:80 deleted",
		"listener HTTP:80 created with its pool and 2 members and a health monitor",
		"listener TCP:443 created with its pool and 2 members",
	}; !slices.Equal(got, want) {
		t.Errorf("everyStep:\n%q\nwant\n%q", got, want)
	}
}

// TestDryRunCreateShowsANewAddress: a load balancer the dry run creates
// shows an address to come (a made-up name; the switch gives the Service
// Octavia's VIP), or the hostname annotation's, not none: the plan would
// say the Service gets no address (test/e2e/planswitch, case os-new).
func TestDryRunCreateShowsANewAddress(t *testing.T) {
	ctx, _ := backends.WithDryRun(t.Context())
	st := dryRunCreate(ctx, backends.IntentCreate, "mccm_c1_default_web", nil, &lbOptions{})
	if len(st.Ingress) != 1 || st.Ingress[0].Hostname != "mccm-c1-default-web.new-address.dry-run.invalid" {
		t.Errorf("dry-run create status %+v, want one made-up address", st)
	}
	st = dryRunCreate(ctx, backends.IntentCreate, "mccm_c1_default_web", nil, &lbOptions{hostname: "web.example.com"})
	if len(st.Ingress) != 1 || st.Ingress[0].Hostname != "web.example.com" {
		t.Errorf("dry-run create status %+v with the hostname annotation, want its hostname", st)
	}
}

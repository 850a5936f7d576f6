package lbcontroller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cloudprovider "k8s.io/cloud-provider"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// instType is a test-only backend type whose load balancers, like an AWS
// NLB with instance targets (the default target type), register their
// nodes by providerID (instance ID), not by address: an address change
// of a node they target changes nothing in them
// (backends.AddressTargeter: TargetsByAddress false). Otherwise it is
// membertest (every node with an InternalIP).
const instType = "instprobe59"

var registerInst sync.Once

type instCloud struct{ *memberCloud }

func (c instCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

// TargetsByAddress: never; the load balancer targets instances.
func (c instCloud) TargetsByAddress(*corev1.Service, *corev1.Node) bool { return false }

func registerInstType() {
	registerInst.Do(func() {
		backends.Register(backends.Registration{
			Type: instType, Scheme: instType,
			Parse: func(raw []byte, path *field.Path, _ string) (any, field.ErrorList) {
				s := &memberSettings{}
				return s, config.DecodeSection(raw, path, s)
			},
			New: func(_ context.Context, o backends.Options) (cloudprovider.Interface, error) {
				s := o.Settings.(*memberSettings) //nolint:forcetypeassert // the registered parser's type.
				return instCloud{&memberCloud{ip: s.IP, members: map[string][]string{}}}, nil
			},
		})
	})
}

const instConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  defaultBackend: inst
backends:
- name: inst
  type: ` + instType + `
  ` + instType + `: {ip: 203.0.113.91}
`

// TestProbe59AddressChangeOfAnInstanceTargetUpdatesNothing (review s59 of
// 9650923): while a Service's first ensure is in flight, a node its load
// balancer targets gets another InternalIP. The load balancer registers
// its targets by instance (TargetsByAddress false, as an AWS NLB with
// instance targets, the default): the address is nothing it holds, and
// the router's own address re-sync (RetargetsOn) re-targets nothing for
// it (docs/routing.md: "an NLB with instance targets is not re-targeted
// when an EC2 node's addresses arrive (every node a churn registers is
// one such change)"). The controller's readdressed asks only whether a
// handed node has other addresses now, not whether the load balancer
// reaches it by them: it marks the Service stale and its next sync calls
// UpdateLoadBalancer with the same targets. What a user sees: every
// Service of ours (a class on AWS, or classless under our controller)
// created while nodes register (their addresses arrive after their
// providerID) costs one needless NLB update (five ELBv2 calls, the
// router's docs count) and an UpdatedLoadBalancer event with unchanged
// hosts; at scale, one per Service being created during a churn.
func TestProbe59AddressChangeOfAnInstanceTargetUpdatesNothing(t *testing.T) {
	registerInstType()
	objs := []k8sruntime.Object{
		utilt.NewNode("inst-0", utilt.WithProviderID(instType+"://inst-0"), utilt.WithInternalIP("10.0.3.1")),
		utilt.NewNode("inst-1", utilt.WithProviderID(instType+"://inst-1"), utilt.WithInternalIP("10.0.3.2")),
	}
	e := startEnv(t, envOptions{doc: instConfig, classless: true, versioned: true,
		nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(h *hookedCloud) Cloud { return routerTargets{h} }}, objs...)
	waitFor(t, 30*time.Second, "every node's add counted", func() error {
		if got := e.ctrl.nodeGen.Load(); got != 3 {
			return fmt.Errorf("%d node changes counted, want 3", got)
		}
		return nil
	})
	readdressDuringEnsure(t, e, "inst-0", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.3.9"})
	e.create(t, utilt.NewService("web"))
	waitFor(t, 30*time.Second, "web served by inst", synced(e, t, "web", 1))
	staleMarkTaken(t, e, "default/web")
	if n := e.cloud.updates.Load(); n != 0 {
		t.Errorf("%d UpdateLoadBalancer calls for a Service whose load balancer registers its targets by instance, after an address change of one (the same targets: %v); events %v",
			n, e.ctrl.stateOf("default/web").nodes, e.events(t, "web"))
	}
}

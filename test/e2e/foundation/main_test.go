// Package foundation is the end-to-end suite for the router and the
// bare-metal backend: the built multicloud-ccm binary against a real
// kube-apiserver and etcd. One control plane and one CCM serve every test
// in the package; tests create their own uniquely named Nodes and Services
// and assert on what they read back from the API.
package foundation

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// cloudConfig has two bare-metal backends. metal owns the bm-* machines
// (by providerID, by the name rule, by the label hint) and the 192.0.2.0/28
// pool (plus 192.0.2.64/28 for requested addresses only, so tests running
// in parallel never race for one); metal2 shares dup-1 with metal so that node is ambiguous, and has
// a pool of its own to move load balancers to.
const cloudConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: e2e
loadBalancer:
  defaultBackend: metal
nodes:
  unmanaged: error
  rules:
  - backend: metal
    nodeNameRegex: '^bm-'
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: bm-1
      addresses: [{type: InternalIP, address: 10.0.0.11}, {type: Hostname, address: bm-1}]
      zone: rack-a
      region: dc-1
      instanceType: r650
      labels: {example.com/tier: gold}
    - name: bm-2
      addresses: [{type: InternalIP, address: 10.0.0.12}]
      zone: rack-b
      region: dc-1
    - name: bm-3
      addresses: [{type: InternalIP, address: 10.0.0.13}]
      zone: rack-b
      region: dc-1
    - name: hinted-1
      addresses: [{type: InternalIP, address: 10.0.0.21}]
      zone: rack-c
      region: dc-1
    - name: dup-1
      addresses: [{type: InternalIP, address: 10.0.0.31}]
    addressPools:
    - name: public
      addresses: ["192.0.2.0/28"]
      autoAssign: true
    - name: reserved
      addresses: ["192.0.2.64/28"]
      autoAssign: false
- name: metal2
  type: baremetal
  baremetal:
    inventory:
    - name: dup-1
      addresses: [{type: InternalIP, address: 10.1.0.31}]
    addressPools:
    - name: other
      addresses: ["198.51.100.0/28"]
      autoAssign: true
`

// Timeouts. The CCM runs with --node-monitor-period=1s and
// --node-status-update-frequency=5s, so each of these is many periods.
const (
	settle  = 30 * time.Second // a controller acting on a new object
	quiet   = 7 * time.Second  // how long "nothing happens" is watched
	stopTTL = 15 * time.Second
)

var (
	suite framework.Shared

	ccmOnce sync.Once
	ccm     *framework.CCM
	ccmErr  error

	// exclusive lets a test that restarts the CCM run alone: every other
	// test holds it for reading.
	exclusive sync.RWMutex
)

func TestMain(m *testing.M) {
	suite.OnStop(func() {
		if ccm == nil {
			return
		}
		if err := ccm.Stop(stopTTL); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		}
		if suite.Failed() {
			fmt.Fprint(os.Stderr, ccm.Logs(400))
		}
	})
	os.Exit(suite.Run(m))
}

// env returns the shared control plane and CCM, starting them on first
// use, and prints the CCM's log tail if the calling test fails.
func env(t *testing.T) (*framework.ControlPlane, *framework.CCM) {
	t.Helper()
	cp := suite.ControlPlane(t)
	ccmOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		ccm, ccmErr = cp.StartCCM(ctx, framework.CCMOptions{CloudConfig: cloudConfig})
	})
	if ccmErr != nil {
		t.Fatalf("start CCM: %v", ccmErr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(ccm.Logs(framework.LogLines))
		}
	})
	return cp, ccm
}

// shared is env for tests that run in parallel with others.
func shared(t *testing.T) (*framework.ControlPlane, *framework.CCM) {
	t.Helper()
	exclusive.RLock()
	t.Cleanup(exclusive.RUnlock)
	return env(t)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

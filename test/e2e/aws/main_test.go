// Package aws is the end-to-end suite for the AWS backend: the built
// multicloud-ccm binary against a real kube-apiserver and etcd, with its
// aws backend's EC2, ELBv2 and STS endpoints pointed at the awsfake wire
// fake running in the test process. Its headline is the vSphere-on-AWS
// case: nodes of another cloud (here the bare-metal backend's inventory)
// behind an AWS Network Load Balancer with IP targets.
package aws

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

const (
	region    = "eu-west-1"
	clusterID = "e2e-aws"
	ns        = "default"
	// awsBackend and metalBackend are the backends' names in the config.
	awsBackend   = "aws-vpc"
	metalBackend = "onprem"
	// metalPool is the bare-metal backend's address pool.
	metalPool = "192.0.2.0/28"
	// awsClass and metalClass are the config's load-balancer classes.
	awsClass   = "multicloud-ccm.io/aws-nlb"
	metalClass = "multicloud-ccm.io/onprem"
	// repairPeriod is the CCM's --load-balancer-resync-period here.
	repairPeriod = 3 * time.Second

	settle  = 45 * time.Second // a controller acting on a new object
	stopTTL = 15 * time.Second
)

// cloudConfigTemplate has the bare-metal inventory (the VMs of another
// cloud, linked to the VPC over private addresses 192.168.10.0/24) and the
// aws backend against the fake. %[1]s is the fake's URL, %[2]s the VPC.
const cloudConfigTemplate = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: ` + clusterID + `
loadBalancer:
  classes:
  - {name: ` + awsClass + `, backend: ` + awsBackend + `}
  - {name: ` + metalClass + `, backend: ` + metalBackend + `}
nodes:
  rules:
  - backend: ` + metalBackend + `
    nodeNameRegex: '^vm-'
backends:
- name: ` + metalBackend + `
  type: baremetal
  baremetal:
    inventory:
    - name: vm-1
      addresses: [{type: InternalIP, address: 192.168.10.11}]
      zone: dc1-a
      region: dc1
    - name: vm-2
      addresses: [{type: InternalIP, address: 192.168.10.12}]
      zone: dc1-b
      region: dc1
    - name: vm-3
      addresses: [{type: InternalIP, address: 192.168.10.13}]
      zone: dc1-a
      region: dc1
    - name: vm-4
      addresses: [{type: InternalIP, address: 192.168.10.14}]
      zone: dc1-b
      region: dc1
    addressPools:
    - name: public
      addresses: ["` + metalPool + `"]
      autoAssign: true
- name: ` + awsBackend + `
  type: aws
  aws:
    region: ` + region + `
    vpc: %[2]s
    endpoints: {ec2: %[1]q, elbv2: %[1]q, sts: %[1]q}
    credentials:
      accessKeyID: {env: E2E_AWS_ACCESS_KEY_ID}
      secretAccessKey: {env: E2E_AWS_SECRET_ACCESS_KEY}
    instanceCacheTTL: 2s
    retry: {maxAttempts: 4, maxBackoff: 200ms}
`

var (
	suite framework.Shared

	// fake is the simulated AWS, served for the CCM on a real socket.
	fake   *awsfake.Running
	seeded awsfake.Seeded

	ccmOnce sync.Once
	ccm     *framework.CCM
	ccmErr  error
)

func TestMain(m *testing.M) {
	suite.OnStop(func() {
		if ccm != nil {
			if err := ccm.Stop(stopTTL); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			}
			if suite.Failed() {
				fmt.Fprint(os.Stderr, ccm.Logs(400))
			}
		}
		if fake != nil {
			_ = fake.Close()
		}
	})
	os.Exit(suite.Run(m))
}

// env returns the control plane and the CCM, starting the fake and the CCM
// on first use.
func env(t *testing.T) *framework.ControlPlane {
	t.Helper()
	cp := suite.ControlPlane(t)
	ccmOnce.Do(func() {
		f := awsfake.New(region)
		seeded = f.Seed(awsfake.SeedSpec{ClusterID: clusterID, Instances: 4})
		if fake, ccmErr = f.Start("127.0.0.1:0"); ccmErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		ccm, ccmErr = cp.StartCCM(ctx, framework.CCMOptions{
			CloudConfig: fmt.Sprintf(cloudConfigTemplate, fake.URL, seeded.VPCID),
			Env:         []string{"E2E_AWS_ACCESS_KEY_ID=AKIDE2EFAKE", "E2E_AWS_SECRET_ACCESS_KEY=e2e-fake-secret"},
			ExtraArgs:   []string{"--load-balancer-resync-period=" + repairPeriod.String()},
		})
	})
	if ccmErr != nil {
		t.Fatalf("start fake AWS and CCM: %v", ccmErr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(ccm.Logs(framework.LogLines))
			t.Logf("AWS calls: %v", fake.CallCounts())
		}
	})
	return cp
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Package multi is the end-to-end suite for Services served by several
// clouds at once and moved between clouds with a drain (issue 28): the
// built multicloud-ccm binary against a real kube-apiserver and etcd, with
// a bare-metal backend and an aws backend against the awsfake wire fake.
// Each test runs its own control plane and CCM (or two, for a leader
// failover), since it restarts or kills them.
package multi

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

var suite framework.Shared

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

const (
	region    = "eu-west-1"
	clusterID = "e2e-multi"
	ns        = "default"
	accessKey = "AKIDMULTI"
	// metalPool is the bare-metal backend's address pool.
	metalPool = "192.0.2.0/28"
	settle    = 60 * time.Second

	backendAnn  = "multicloud-ccm.io/load-balancer-backend"
	drainAnn    = "multicloud-ccm.io/load-balancer-drain"
	drainingAnn = "multicloud-ccm.io/load-balancer-draining"
	recordAnn   = "multicloud-ccm.io/load-balancer-backends"
	servedAnn   = "multicloud-ccm.io/load-balancer-served-by"
	// external-dns's target annotation (both prefixes) and the router's
	// mark of its own value.
	dnsTargetAnn   = "external-dns.alpha.kubernetes.io/target"
	dnsTargetGAAnn = "external-dns.kubernetes.io/target"
	dnsMarkAnn     = "multicloud-ccm.io/load-balancer-dns-target"

	// bothClass is a class served by aws and bare metal at once.
	bothClass = "multicloud-ccm.io/both"

	inUseMetric = `multicloud_ccm_baremetal_addresses_in_use_total{backend="metal",family="IPv4",pool="public"}`
)

const cloudConfigTemplate = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: ` + clusterID + `
loadBalancer:
  classes: [{name: ` + bothClass + `, backends: [aws, metal]}]
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: bm-1, addresses: [{type: InternalIP, address: 10.0.0.11}]}, {name: bm-2, addresses: [{type: InternalIP, address: 203.0.113.12}]}]
    addressPools: [{name: public, addresses: ["` + metalPool + `"], autoAssign: true}]
- name: aws
  type: aws
  aws:
    region: ` + region + `
    vpc: %[2]s
    endpoints: {ec2: %[1]q, elbv2: %[1]q, sts: %[1]q}
    credentials:
      accessKeyID: {env: E2E_AWS_ACCESS_KEY_ID}
      secretAccessKey: {env: E2E_AWS_SECRET_ACCESS_KEY}
    instanceCacheTTL: 1s
    retry: {maxAttempts: 2, maxBackoff: 100ms}
`

// env is one test's world: a private control plane, the AWS fake with two
// instances (their Nodes created), a bare-metal Node, and the CCM options
// to start one or more CCMs with.
type env struct {
	t      *testing.T
	cp     *framework.ControlPlane
	fake   *awsfake.Running
	seeded awsfake.Seeded
	opts   framework.CCMOptions
	// octavia counts the Service's Octavia load balancers, for a test
	// with the OpenStack backend ("os").
	octavia func() int
}

func newEnv(t *testing.T, extraArgs ...string) *env {
	t.Helper()
	cp := framework.StartControlPlaneT(t)
	f := awsfake.New(region)
	seeded := f.Seed(awsfake.SeedSpec{ClusterID: clusterID, Instances: 2})
	f.SetAccessKeys(accessKey)
	running, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = running.Close() })
	e := &env{t: t, cp: cp, fake: running, seeded: seeded, opts: framework.CCMOptions{
		CloudConfig: fmt.Sprintf(cloudConfigTemplate, running.URL, seeded.VPCID),
		Env:         []string{"E2E_AWS_ACCESS_KEY_ID=" + accessKey, "E2E_AWS_SECRET_ACCESS_KEY=secret"},
		ExtraArgs:   extraArgs,
	}}
	ctx := e.ctx()
	for _, in := range seeded.Instances {
		if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(in.PrivateDNSName,
			framework.WithProviderID(fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)))); err != nil {
			t.Fatal(err)
		}
	}
	// bm-1 has a private address (an AWS NLB reaches it by IP), bm-2 only a
	// public one, which AWS takes as no IP target (docs/aws.md, Targets).
	for _, name := range []string{"bm-1", "bm-2"} {
		if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(name, framework.WithProviderID("baremetal://"+name))); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	e.t.Cleanup(cancel)
	return ctx
}

// startCCM starts a CCM named name, stopped when the test ends (one the
// test killed is fine), logging its tail if the test fails.
func (e *env) startCCM(name string, extraArgs ...string) *framework.CCM {
	e.t.Helper()
	opts := e.opts
	opts.Name = name
	opts.ExtraArgs = append(append([]string{}, opts.ExtraArgs...), extraArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := e.cp.StartCCM(ctx, opts)
	if c != nil && c.Process != nil {
		e.t.Cleanup(func() {
			_ = c.Stop(15 * time.Second) // a killed leader reports its exit
			if e.t.Failed() {
				e.t.Log(c.Logs(framework.LogLines))
				e.t.Logf("AWS calls: %v", e.fake.CallCounts())
			}
		})
	}
	if err != nil {
		e.t.Fatalf("start CCM %s: %v", name, err)
	}
	return c
}

func (e *env) service(ctx context.Context, name string) *corev1.Service {
	e.t.Helper()
	s, err := e.cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// edit changes the Service, retrying on conflicts (the CCM writes it too).
func (e *env) edit(ctx context.Context, name string, change func(*corev1.Service)) {
	e.t.Helper()
	for range 20 {
		s := e.service(ctx, name)
		change(s)
		_, err := e.cp.Client.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("cannot edit Service %s", name)
}

// nlbs counts the NLBs in the AWS fake.
func (e *env) nlbs() int { return len(e.fake.LoadBalancers()) }

// nlbsOf counts the NLBs in the AWS fake tagged for the Service.
func (e *env) nlbsOf(name string) int {
	n := 0
	for _, lb := range e.fake.LoadBalancers() {
		if lb.Tags["kubernetes.io/service-name"] == ns+"/"+name {
			n++
		}
	}
	return n
}

// addresses is the Service's status, IPs and hostnames, in order.
func addresses(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP+in.Hostname)
	}
	return out
}

// metric reads one sample from the CCM's /metrics ("" when absent or the
// CCM does not answer).
func metric(ctx context.Context, c *framework.CCM, name string) string {
	code, body, err := c.Get(ctx, "/metrics")
	if err != nil || code != 200 {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

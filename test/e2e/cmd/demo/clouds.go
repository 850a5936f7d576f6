package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/sims/vcsim"
)

// The backends of the demo's cloud-config.
const (
	metalBackend   = "metal"
	vsphereBackend = "onprem"
	awsBackend     = "aws"
	demoRegion     = "eu-west-1"
)

// clouds are the simulated clouds the demo runs inside its own process: a
// vCenter (govmomi's simulator, with zone and region tags) and AWS (the
// EC2/ELBv2/STS wire-protocol fake the AWS backend is tested against). The
// CCM reaches both over real HTTP, exactly as it would reach the real ones.
type clouds struct {
	vc      *vcsim.Simulator
	vsphere vcsim.Backend
	aws     *awsfake.Running
	seeded  awsfake.Seeded
}

// startClouds starts the vCenter simulator with four VMs in two zones and
// the AWS fake with a VPC and one EC2 instance.
func startClouds(ctx context.Context) (*clouds, error) {
	vc, err := vcsim.Start(ctx, vcsim.Options{VMs: 4, Zones: []string{"vc-zone-a", "vc-zone-b"}, Region: "vc-region-1"})
	if err != nil {
		return nil, fmt.Errorf("start the vCenter simulator: %w", err)
	}
	c := &clouds{vc: vc, vsphere: vc.Backend(vsphereBackend)}
	fake := awsfake.New(demoRegion)
	c.seeded = fake.Seed(awsfake.SeedSpec{ClusterID: clusterID, Instances: 1})
	if c.aws, err = fake.Start("127.0.0.1:0"); err != nil {
		vc.Close()
		return nil, fmt.Errorf("start the AWS fake: %w", err)
	}
	return c, nil
}

// close stops both simulations.
func (c *clouds) close() error {
	c.vc.Close()
	return c.aws.Close()
}

// ec2 is the demo's one EC2 instance.
func (c *clouds) ec2() awsfake.Instance { return c.seeded.Instances[0] }

// env are the credentials the simulated clouds accept, as variables the
// rendered config refers to.
func (c *clouds) env() []string {
	return append(c.vsphere.Env(), "DEMO_AWS_ACCESS_KEY_ID=AKIDDEMOFAKE", "DEMO_AWS_SECRET_ACCESS_KEY=demo-fake-secret")
}

// secretFiles writes each credential of env to a file of its own in dir
// and returns config with every {env: NAME} reference turned into {file:
// <that file>}: anyone can run the CCM or `multicloud-ccm plan` with that
// config, without the demo's environment.
func secretFiles(config, dir string, env []string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(value), 0o600); err != nil {
			return "", err
		}
		config = strings.ReplaceAll(config, "{env: "+name+"}", "{file: "+path+"}")
	}
	if strings.Contains(config, "{env: ") {
		return "", fmt.Errorf("the demo's cloud-config refers to a variable it has no value for:\n%s", config)
	}
	return config, nil
}

// cloudConfig renders the demo's cloud-config: the bare-metal backend
// (the default for load balancers), the vSphere backend at the simulator
// and the AWS backend at the fake.
func (c *clouds) cloudConfig() string {
	var b strings.Builder
	b.WriteString(baseConfig)
	b.WriteString(c.vsphere.YAML())
	fmt.Fprintf(&b, `- name: %s
  type: aws
  aws:
    region: %s
    vpc: %s
    endpoints: {ec2: %[4]q, elbv2: %[4]q, sts: %[4]q}
    credentials:
      accessKeyID: {env: DEMO_AWS_ACCESS_KEY_ID}
      secretAccessKey: {env: DEMO_AWS_SECRET_ACCESS_KEY}
`, awsBackend, demoRegion, c.seeded.VPCID, c.aws.URL)
	return b.String()
}

// writeAWS prints what the simulated AWS holds: each NLB and the targets of
// each of its target groups.
func (c *clouds) writeAWS(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NLB\tSCHEME\tDNS-NAME\tLISTENERS")
	for _, lb := range c.aws.LoadBalancers() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", lb.Name, lb.Scheme, lb.DNSName, strings.Join(lb.Listeners, ","))
	}
	_ = w.Flush()
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nTARGET-GROUP\tTYPE\tPORT\tTARGETS")
	for _, tg := range c.aws.TargetGroups() {
		fmt.Fprintf(w, "%s\t%s\t%s/%d\t%s\n", tg.Name, tg.TargetType, tg.Protocol, tg.Port, orDash(strings.Join(tg.Targets, ",")))
	}
	_ = w.Flush()
}

package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// TestDemoOnce runs the demo as `make demo` would, with -once, and checks
// the tables it prints: bare-metal, vSphere and EC2 nodes initialised by
// their backends, bare-metal addresses, and an AWS NLB targeting every node.
func TestDemoOnce(t *testing.T) {
	framework.RequireBinaries(t, nil)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := run(ctx, options{once: true, timeout: 60 * time.Second, out: &out})
	t.Log(out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	rows := []struct{ name, re string }{
		{"bm-1 by providerID", `(?m)^bm-1\s+baremetal://bm-1\s+rack-a\s+InternalIP=10\.0\.0\.11,Hostname=bm-1\s+metal\s+false$`},
		{"bm-2 by the name rule", `(?m)^bm-2\s+baremetal://bm-2\s+rack-b\s+\S+\s+metal\s+false$`},
		{"edge-1 by the label hint", `(?m)^edge-1\s+baremetal://edge-1\s+edge\s+\S+\s+metal\s+false$`},
		{"vm-0 found in vSphere by its system UUID", `(?m)^vm-0\s+vsphere://[0-9a-f-]{36}\s+vc-zone-a\s+InternalIP=10\.20\.0\.1\S*\s+onprem\s+false$`},
		{"vm-1 in the other zone", `(?m)^vm-1\s+vsphere://[0-9a-f-]{36}\s+vc-zone-b\s+\S+\s+onprem\s+false$`},
		{"the EC2 instance", `(?m)^ip-10-0-100-10\.eu-west-1\.compute\.internal\s+aws:///eu-west-1a/i-[0-9a-f]+\s+eu-west-1a\s+\S*InternalIP=10\.0\.100\.10\S*\s+aws\s+false$`},
		{"web from the pool", `(?m)^default/web\s+80/TCP\s+metal \(default\)\s+192\.0\.2\.([1-9]|1[0-4])$`},
		{"shop on an AWS NLB", `(?m)^default/shop\s+80/TCP\s+aws\s+\S+\.elb\.eu-west-1\.amazonaws\.com$`},
		// A target group mixing machines outside AWS with an EC2 instance
		// targets them all by IP; addresses outside the VPC are in zone "all".
		{"IP targets: every node", `(?m)^\S+\s+ip\s+TCP/\d+\s+10\.0\.0\.11:\d+,10\.0\.0\.12:\d+,10\.0\.1\.21:\d+,10\.0\.100\.10:\d+,(10\.20\.0\.\d:\d+@all,){3}10\.20\.0\.\d:\d+@all$`},
		{"api at its requested address", `(?m)^default/api\s+80/TCP\s+metal \(default\)\s+192\.0\.2\.70$`},
		{"kubectl hint", `export KUBECONFIG=\S+admin\.kubeconfig`},
		// The plan command it prints, run without the demo's environment
		// (its credentials are files): nothing to do.
		{"plan command", `(?m)^\s+\S+multicloud-ccm plan --cloud-config \S+ --kubeconfig \S+admin\.kubeconfig$`},
		{"plan: nothing to do", `(?m)^\d+ nodes claimed, 0 would be deleted; \d+ load balancers adopted, 0 created, 0 replaced; 0 changes; \d+ annotations not honoured$`},
	}
	if strings.Contains(out.String(), "\nplan: ") {
		t.Error("the plan command the demo prints failed")
	}
	for _, r := range rows {
		if !regexp.MustCompile(r.re).MatchString(out.String()) {
			t.Errorf("%s: no line matches %s", r.name, r.re)
		}
	}
	shared := regexp.MustCompile(`(?m)^default/dns-(?:tcp|udp)\s+53/(?:TCP|UDP)\s+metal \(default\)\s+(\S+)$`).FindAllStringSubmatch(out.String(), -1)
	if len(shared) != 2 || shared[0][1] != shared[1][1] || shared[0][1] == "-" {
		t.Errorf("dns-tcp and dns-udp should share one address, got %v", shared)
	}
}

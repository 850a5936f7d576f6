package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// clusterID is the config's clusterID: it names and tags what the CCM
// creates in the clouds.
const clusterID = "demo"

// defaultBackend is the config's loadBalancer.defaultBackend.
const defaultBackend = metalBackend

// baseConfig is the start of the demo's cloud-config: one bare-metal backend
// with three machines and two address pools. clouds.cloudConfig appends the
// vSphere and AWS backends.
const baseConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: ` + clusterID + `
loadBalancer:
  defaultBackend: ` + defaultBackend + `
nodes:
  unmanaged: error
  rules:
  - backend: ` + metalBackend + `
    nodeNameRegex: '^bm-'
backends:
- name: ` + metalBackend + `
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
      addresses: [{type: InternalIP, address: 10.0.0.12}, {type: Hostname, address: bm-2}]
      zone: rack-b
      region: dc-1
      instanceType: r650
    - name: edge-1
      addresses: [{type: InternalIP, address: 10.0.1.21}, {type: ExternalIP, address: 203.0.113.21}]
      zone: edge
      region: dc-2
      instanceType: nuc
    addressPools:
    - name: public
      addresses: ["192.0.2.0/28"]
      autoAssign: true
    - name: reserved
      addresses: ["192.0.2.64/28"]
      autoAssign: false
`

// nodes are registered as kubelets with --cloud-provider=external would:
// bare metal with --provider-id, matched by the name rule, and by the
// multicloud-ccm.io/backend label hint; the vSphere VMs with nothing but
// their SMBIOS system UUID (the router asks every backend, the vSphere one
// claims them); the EC2 instance with the providerID the AWS tooling sets.
func nodes(c *clouds) []*corev1.Node {
	out := []*corev1.Node{
		framework.NewNode("bm-1", framework.WithProviderID("baremetal://bm-1")),
		framework.NewNode("bm-2"),
		framework.NewNode("edge-1", framework.WithLabel(string(annotation.NodeBackend), metalBackend)),
	}
	for _, vm := range c.vc.VMs {
		n := framework.NewNode(vm.Name)
		n.Status.NodeInfo.SystemUUID = vm.UUID
		out = append(out, n)
	}
	in := c.ec2()
	return append(out, framework.NewNode(in.PrivateDNSName, framework.WithProviderID(fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID))))
}

// services: one from the default pool, one asking for an address, two
// sharing one address on different ports, and one on an AWS NLB whose
// targets are every node (IP targets for the bare-metal and vSphere
// machines, an instance target for the EC2 instance).
func services() []*corev1.Service {
	const ns = "default"
	return []*corev1.Service{
		framework.NewLoadBalancerService(ns, "web"),
		framework.NewLoadBalancerService(ns, "api", framework.WithAnnotation(string(annotation.LoadBalancerIPs), "192.0.2.70")),
		framework.NewLoadBalancerService(ns, "dns-tcp", framework.WithPort("dns", 53, corev1.ProtocolTCP),
			framework.WithAnnotation(string(annotation.AllowSharedIP), "dns")),
		framework.NewLoadBalancerService(ns, "dns-udp", framework.WithPort("dns", 53, corev1.ProtocolUDP),
			framework.WithAnnotation(string(annotation.AllowSharedIP), "dns")),
		framework.NewLoadBalancerService(ns, "shop", framework.WithAnnotation(string(annotation.LoadBalancerBackend), awsBackend)),
	}
}

func createObjects(ctx context.Context, cp *framework.ControlPlane, c *clouds) error {
	for _, n := range nodes(c) {
		if err := createKubeletNode(ctx, cp, n); err != nil {
			return err
		}
	}
	if err := createSharedPair(ctx, cp); err != nil {
		return err
	}
	svcs := services()
	for _, s := range append(svcs[:2:2], svcs[4]) {
		if _, err := framework.CreateService(ctx, cp.Client, s); err != nil {
			return err
		}
	}
	return nil
}

// createKubeletNode creates n and, as a kubelet does once it runs, reports
// its SMBIOS system UUID in status.nodeInfo.
func createKubeletNode(ctx context.Context, cp *framework.ControlPlane, n *corev1.Node) error {
	uuid := n.Status.NodeInfo.SystemUUID
	if _, err := framework.CreateNode(ctx, cp.Client, n); err != nil || uuid == "" {
		return err
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"nodeInfo": map[string]any{"systemUUID": uuid}}})
	if err != nil {
		return err
	}
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("node %s: report system UUID: %w", n.Name, err)
	}
	return nil
}

// createSharedPair creates dns-tcp, waits for its address and asks for the
// same one for dns-udp.
func createSharedPair(ctx context.Context, cp *framework.ControlPlane) error {
	svcs := services()
	tcp, udp := svcs[2], svcs[3]
	if _, err := framework.CreateService(ctx, cp.Client, tcp); err != nil {
		return err
	}
	var ip string
	err := framework.WaitFor(ctx, 60*time.Second, "an address for dns-tcp", func(ctx context.Context) (bool, string, error) {
		s, err := cp.Client.CoreV1().Services(tcp.Namespace).Get(ctx, tcp.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if ips := framework.IngressIPs(s); len(ips) > 0 {
			ip = ips[0]
			return true, "", nil
		}
		return false, "no ingress yet", nil
	})
	if err != nil {
		return err
	}
	udp.Annotations[string(annotation.LoadBalancerIPs)] = ip
	_, err = framework.CreateService(ctx, cp.Client, udp)
	return err
}

// waitSettled waits until every node is initialised (untainted, with the
// addresses the node controller patches in afterwards), every Service has
// an address, and every IP target group of the simulated AWS targets every
// node's InternalIP (a node's addresses may arrive after the NLB was made;
// the router then re-targets it).
func waitSettled(ctx context.Context, cp *framework.ControlPlane, c *clouds, timeout time.Duration) error {
	return framework.WaitFor(ctx, timeout, "every node initialised, every Service with an address and every node targeted", func(ctx context.Context) (bool, string, error) {
		var pending []string
		var ips []string
		for _, n := range nodes(c) {
			got, err := cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || framework.HasTaint(got, framework.UninitializedTaint) || len(got.Status.Addresses) == 0 {
				pending = append(pending, "node/"+n.Name)
				continue
			}
			for _, a := range got.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					ips = append(ips, a.Address)
				}
			}
		}
		for _, tg := range c.aws.TargetGroups() {
			if tg.TargetType != "ip" {
				continue
			}
			for _, ip := range ips {
				if !slices.ContainsFunc(tg.Targets, func(target string) bool { return strings.HasPrefix(target, ip+":") }) {
					pending = append(pending, "target-group/"+tg.Name+" target "+ip)
				}
			}
		}
		for _, s := range services() {
			got, err := cp.Client.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
			if err != nil || len(ingress(got)) == 0 {
				pending = append(pending, "service/"+s.Name)
			}
		}
		return len(pending) == 0, "pending: " + strings.Join(pending, ", "), nil
	})
}

func printTables(ctx context.Context, out io.Writer, cp *framework.ControlPlane, c *clouds) error {
	nodeList, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	svcList, err := cp.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	fmt.Fprintln(out, "\nNODES")
	writeNodes(out, nodeList.Items)
	fmt.Fprintln(out, "\nSERVICES")
	writeServices(out, svcList.Items)
	fmt.Fprintln(out, "\nAWS (simulated: the EC2/ELBv2 wire-protocol fake)")
	c.writeAWS(out)
	return nil
}

func writeNodes(out io.Writer, items []corev1.Node) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tPROVIDER-ID\tZONE\tADDRESSES\tBACKEND\tTAINTED")
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	for _, n := range items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%v\n", n.Name, orDash(n.Spec.ProviderID),
			orDash(n.Labels[corev1.LabelTopologyZone]), orDash(addresses(n.Status.Addresses)),
			orDash(n.Labels[string(annotation.NodeBackend)]), framework.HasTaint(&n, framework.UninitializedTaint))
	}
	_ = w.Flush()
}

func writeServices(out io.Writer, items []corev1.Service) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE/NAME\tPORTS\tBACKEND\tEXTERNAL-IP/HOSTNAME")
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	for _, s := range items {
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		fmt.Fprintf(w, "%s/%s\t%s\t%s\t%s\n", s.Namespace, s.Name, ports(s.Spec.Ports), serviceBackend(&s),
			orDash(strings.Join(ingress(&s), ",")))
	}
	_ = w.Flush()
}

func serviceBackend(s *corev1.Service) string {
	if b := s.Annotations[string(annotation.LoadBalancerBackend)]; b != "" {
		return b
	}
	return defaultBackend + " (default)"
}

// ingress lists the Service's load-balancer addresses: IPs (bare metal) or
// DNS names (an AWS NLB).
func ingress(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		} else if in.Hostname != "" {
			out = append(out, in.Hostname)
		}
	}
	return out
}

func addresses(addrs []corev1.NodeAddress) string {
	parts := make([]string, 0, len(addrs))
	for _, a := range addrs {
		parts = append(parts, fmt.Sprintf("%s=%s", a.Type, a.Address))
	}
	return strings.Join(parts, ",")
}

func ports(ps []corev1.ServicePort) string {
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
	}
	return strings.Join(parts, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

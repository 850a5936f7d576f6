package awsfake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// Running is a fake served over HTTP on a real socket, for programs that are
// not tests (the demo) and for tests that hand the URL to another process
// (the end-to-end suite runs the CCM binary against it).
type Running struct {
	// Server is the fake: seed it, inspect it, throttle it.
	*Server
	// URL is the endpoint to configure for every service (ec2, elbv2 and sts
	// in the aws section's endpoints): http://127.0.0.1:<port>.
	URL string

	srv  *http.Server
	done chan error
}

// Start serves the fake on addr ("127.0.0.1:0" picks a free port) until
// Close. The fake accepts any access key and signature: give the client
// static credentials so it never looks for real ones.
func (s *Server) Start(addr string) (*Running, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("awsfake: listen on %s: %w", addr, err)
	}
	r := &Running{Server: s, URL: "http://" + ln.Addr().String(), done: make(chan error, 1),
		srv: &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}}
	go func() { r.done <- r.srv.Serve(ln) }()
	return r, nil
}

// Close stops serving and waits for the server to stop.
func (r *Running) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	if serveErr := <-r.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// SeedSpec describes a VPC for Seed.
type SeedSpec struct {
	// ClusterID, when set, tags the subnets kubernetes.io/cluster/<id>=shared
	// and the instances kubernetes.io/cluster/<id>=owned, as cluster
	// installers do (upstream's provider takes only instances so tagged).
	ClusterID string
	// VPCID is the VPC's ID. Default vpc-0e7a3f1c.
	VPCID string
	// Zones are the availability zones, e.g. eu-west-1a. Default the
	// region's zones a and b.
	Zones []string
	// Instances is how many running instances to add, spread over the zones'
	// private subnets.
	Instances int
	// InstanceType of the instances. Default m5.large.
	InstanceType string
	// NodeSecurityGroup, when set, creates the nodes' security group
	// (k8s-nodes-<ClusterID>, tagged kubernetes.io/cluster/<id>=owned) and
	// puts every instance in it, as cluster installers do.
	NodeSecurityGroup bool
}

// Seeded is what Seed created.
type Seeded struct {
	VPCID string
	// CIDR is the VPC's CIDR block, 10.0.0.0/16.
	CIDR string
	// PublicSubnets (10.0.<i>.0/24, tagged kubernetes.io/role/elb=1) and
	// PrivateSubnets (10.0.<100+i>.0/24, tagged
	// kubernetes.io/role/internal-elb=1) are one per zone, in zone order.
	PublicSubnets, PrivateSubnets []string
	// Instances are the running instances, in order.
	Instances []Instance
	// MainRouteTable is the VPC's main route table (the local route only):
	// the private subnets use it. PublicRouteTable routes 0.0.0.0/0 to the
	// internet gateway InternetGateway and is associated with the public
	// subnets. Neither is tagged for the cluster.
	MainRouteTable, PublicRouteTable, InternetGateway string
	// NodeSecurityGroup is the nodes' security group, when asked for.
	NodeSecurityGroup string
}

// Seed creates a VPC (10.0.0.0/16) laid out as a Kubernetes cluster's usually
// is: per zone a public subnet tagged for internet-facing load balancers and
// a private one tagged for internal load balancers, and running instances in
// the private subnets with private DNS names of the form
// ip-10-0-100-10.<region>.compute.internal.
func (s *Server) Seed(spec SeedSpec) Seeded {
	if spec.VPCID == "" {
		spec.VPCID = "vpc-0e7a3f1c"
	}
	if len(spec.Zones) == 0 {
		spec.Zones = []string{s.region + "a", s.region + "b"}
	}
	if spec.InstanceType == "" {
		spec.InstanceType = "m5.large"
	}
	out := Seeded{VPCID: spec.VPCID, CIDR: "10.0.0.0/16"}
	s.AddVPC(spec.VPCID, out.CIDR)
	for i, zone := range spec.Zones {
		pub, priv := s.seedSubnets(spec, i, zone)
		out.PublicSubnets = append(out.PublicSubnets, pub)
		out.PrivateSubnets = append(out.PrivateSubnets, priv)
	}
	var groups []string
	if spec.NodeSecurityGroup {
		out.NodeSecurityGroup = "sg-" + s.newHexID()
		s.mu.Lock()
		s.sgs[out.NodeSecurityGroup] = &securityGroup{id: out.NodeSecurityGroup, name: "k8s-nodes-" + spec.ClusterID, description: "Kubernetes nodes",
			vpcID: spec.VPCID, tags: map[string]string{"kubernetes.io/cluster/" + spec.ClusterID: "owned"}}
		s.mu.Unlock()
		groups = []string{out.NodeSecurityGroup}
	}
	for n := range spec.Instances {
		z := n % len(spec.Zones)
		ip := fmt.Sprintf("10.0.%d.%d", 100+z, 10+n/len(spec.Zones))
		in := Instance{ID: s.newInstanceID(), InstanceType: spec.InstanceType, Zone: spec.Zones[z], ZoneID: s.zoneID(z),
			VPCID: spec.VPCID, SubnetID: out.PrivateSubnets[z], State: "running", PrivateIPs: []string{ip},
			PrivateDNSName: fmt.Sprintf("ip-%s.%s.compute.internal", strings.ReplaceAll(ip, ".", "-"), s.region), SourceDestCheck: true,
			SecurityGroups: groups}
		if spec.ClusterID != "" {
			in.Tags = map[string]string{"kubernetes.io/cluster/" + spec.ClusterID: "owned"}
		}
		s.AddInstance(in)
		out.Instances = append(out.Instances, in)
	}
	out.MainRouteTable, out.PublicRouteTable, out.InternetGateway = "rtb-"+s.newHexID(), "rtb-"+s.newHexID(), "igw-"+s.newHexID()
	s.AddRouteTable(RouteTable{ID: out.MainRouteTable, VPCID: spec.VPCID, Main: true})
	s.AddRouteTable(RouteTable{ID: out.PublicRouteTable, VPCID: spec.VPCID, Subnets: append([]string(nil), out.PublicSubnets...),
		Routes: []Route{{DestinationCIDR: "0.0.0.0/0", GatewayID: out.InternetGateway}}})
	return out
}

func (s *Server) seedSubnets(spec SeedSpec, i int, zone string) (public, private string) {
	for k, sn := range []struct {
		third int
		role  string
	}{{i, "kubernetes.io/role/elb"}, {100 + i, "kubernetes.io/role/internal-elb"}} {
		tags := map[string]string{sn.role: "1", "Name": fmt.Sprintf("%s-%s", strings.TrimPrefix(sn.role, "kubernetes.io/role/"), zone)}
		if spec.ClusterID != "" {
			tags["kubernetes.io/cluster/"+spec.ClusterID] = "shared"
		}
		id := "subnet-" + s.newHexID()
		s.AddSubnet(Subnet{ID: id, VPCID: spec.VPCID, Zone: zone, ZoneID: s.zoneID(i), CIDR: fmt.Sprintf("10.0.%d.0/24", sn.third), Tags: tags})
		if k == 0 {
			public = id
		} else {
			private = id
		}
	}
	return public, private
}

// newInstanceID returns a fresh instance ID, i-<17 hex digits>.
func (s *Server) newInstanceID() string { return "i-" + s.newHexID() }

func (s *Server) newHexID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextID()
}

// zoneID returns the i-th zone's ID the way AWS spells them for the region:
// eu-west-1 -> euw1-az1, us-east-1 -> use1-az1.
func (s *Server) zoneID(i int) string {
	parts := strings.Split(s.region, "-")
	var b strings.Builder
	for j, p := range parts {
		if j == 0 || j == len(parts)-1 {
			b.WriteString(p)
		} else if p != "" {
			b.WriteByte(p[0])
		}
	}
	return fmt.Sprintf("%s-az%d", b.String(), i+1)
}

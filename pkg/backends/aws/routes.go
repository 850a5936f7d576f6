package aws

import (
	"context"
	"fmt"
	"sync"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

var (
	_ cloudprovider.Routes       = (*Routes)(nil)
	_ cloudprovider.InformerUser = (*Cloud)(nil)
)

// Routes programs pod-CIDR routes to the backend's instances in one route
// table: the configured one, else the VPC's table tagged
// kubernetes.io/cluster/<clusterID>. Creating a route disables the
// instance's source/destination check, as forwarding pod traffic needs.
type Routes struct {
	clusterID string
	settings  *Settings
	ec2       EC2API
	instances *Instances

	mu    sync.RWMutex
	nodes corelisters.NodeLister
}

func newRoutes(clusterID string, s *Settings, c EC2API, inst *Instances) *Routes {
	return &Routes{clusterID: clusterID, settings: s, ec2: c, instances: inst}
}

// SetInformers gives the routes a Node lister, to map instances to nodes,
// and the instance cache one, to list the cluster's instances.
func (c *Cloud) SetInformers(f informers.SharedInformerFactory) {
	c.instances.setNodeLister(f.Core().V1().Nodes().Lister())
	if c.routes == nil {
		return
	}
	c.routes.mu.Lock()
	defer c.routes.mu.Unlock()
	c.routes.nodes = f.Core().V1().Nodes().Lister()
}

// routeTable returns the table routes go into.
func (r *Routes) routeTable(ctx context.Context) (*ec2types.RouteTable, error) {
	in := &ec2.DescribeRouteTablesInput{}
	if id := r.settings.Routes.RouteTableID; id != "" {
		in.RouteTableIds = []string{id}
	} else {
		in.Filters = []ec2types.Filter{{Name: awssdk.String("vpc-id"), Values: []string{r.settings.VPC}},
			{Name: awssdk.String("tag-key"), Values: []string{tagClusterPrefix + r.clusterID}}}
	}
	out, err := r.ec2.DescribeRouteTables(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("DescribeRouteTables: %w", err)
	}
	if len(out.RouteTables) != 1 {
		return nil, fmt.Errorf("found %d route tables in %s tagged %s, want exactly 1; tag one or set routes.routeTableID", len(out.RouteTables), r.settings.VPC, tagClusterPrefix+r.clusterID)
	}
	return &out.RouteTables[0], nil
}

// nodeNames maps instance IDs to node names through the Node lister.
func (r *Routes) nodeNames() (map[string]types.NodeName, error) {
	r.mu.RLock()
	lister := r.nodes
	r.mu.RUnlock()
	if lister == nil {
		return nil, fmt.Errorf("no Node informer yet")
	}
	nodes, err := lister.List(everything())
	if err != nil {
		return nil, err
	}
	out := map[string]types.NodeName{}
	for _, n := range nodes {
		if id, err := parseProviderID(n.Spec.ProviderID); err == nil {
			out[id] = types.NodeName(n.Name)
		}
	}
	return out, nil
}

// ListRoutes lists the table's routes to instances. Routes to instances
// that are gone are reported as blackholes, so the route controller
// deletes them.
func (r *Routes) ListRoutes(ctx context.Context, _ string) ([]*cloudprovider.Route, error) {
	rt, err := r.routeTable(ctx)
	if err != nil {
		return nil, err
	}
	names, err := r.nodeNames()
	if err != nil {
		return nil, err
	}
	var out []*cloudprovider.Route
	for _, route := range rt.Routes {
		id, cidr := awssdk.ToString(route.InstanceId), awssdk.ToString(route.DestinationCidrBlock)
		if id == "" || cidr == "" {
			continue
		}
		out = append(out, &cloudprovider.Route{Name: r.clusterID + "-" + cidr, TargetNode: names[id], DestinationCIDR: cidr,
			Blackhole: route.State == ec2types.RouteStateBlackhole})
	}
	return out, nil
}

// CreateRoute routes route.DestinationCIDR to the target node's instance.
func (r *Routes) CreateRoute(ctx context.Context, _ string, _ string, route *cloudprovider.Route) error {
	id, err := r.instanceOf(route.TargetNode)
	if err != nil {
		return err
	}
	if err := r.disableSourceDestCheck(ctx, id); err != nil {
		return err
	}
	rt, err := r.routeTable(ctx)
	if err != nil {
		return err
	}
	_, err = r.ec2.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: rt.RouteTableId, DestinationCidrBlock: awssdk.String(route.DestinationCIDR), InstanceId: awssdk.String(id)})
	if err != nil {
		return fmt.Errorf("CreateRoute %s via %s: %w", route.DestinationCIDR, id, err)
	}
	klog.FromContext(ctx).V(2).Info("Created route", "cidr", route.DestinationCIDR, "node", route.TargetNode)
	return nil
}

func (r *Routes) instanceOf(node types.NodeName) (string, error) {
	r.mu.RLock()
	lister := r.nodes
	r.mu.RUnlock()
	if lister == nil {
		return "", fmt.Errorf("no Node informer yet")
	}
	n, err := lister.Get(string(node))
	if err != nil {
		return "", fmt.Errorf("node %s: %w", node, err)
	}
	return regionalInstanceID(n, r.settings.Region)
}

func (r *Routes) disableSourceDestCheck(ctx context.Context, id string) error {
	in, err := r.instances.byInstanceID(ctx, id)
	if err != nil {
		return err
	}
	if in != nil && in.SourceDestCheck != nil && !*in.SourceDestCheck {
		return nil
	}
	_, err = r.ec2.ModifyInstanceAttribute(ctx, &ec2.ModifyInstanceAttributeInput{InstanceId: awssdk.String(id), SourceDestCheck: &ec2types.AttributeBooleanValue{Value: awssdk.Bool(false)}})
	if err != nil {
		return fmt.Errorf("ModifyInstanceAttribute %s sourceDestCheck=false: %w", id, err)
	}
	return nil
}

// DeleteRoute removes the route; one already gone is not an error.
func (r *Routes) DeleteRoute(ctx context.Context, _ string, route *cloudprovider.Route) error {
	rt, err := r.routeTable(ctx)
	if err != nil {
		return err
	}
	_, err = r.ec2.DeleteRoute(ctx, &ec2.DeleteRouteInput{RouteTableId: rt.RouteTableId, DestinationCidrBlock: awssdk.String(route.DestinationCIDR)})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("DeleteRoute %s: %w", route.DestinationCIDR, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted route", "cidr", route.DestinationCIDR)
	return nil
}

func everything() labels.Selector { return labels.Everything() }

//go:build deps

// Package deps pins the cloud SDK modules while their backends are written,
// so go mod tidy keeps them. It is never built.
package deps

import (
	_ "github.com/aws/aws-sdk-go-v2/aws"
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/credentials"
	_ "github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	_ "github.com/aws/aws-sdk-go-v2/service/ec2"
	_ "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	_ "github.com/aws/aws-sdk-go-v2/service/sts"
	_ "github.com/aws/smithy-go"
	_ "github.com/gophercloud/gophercloud/v2"
	_ "github.com/gophercloud/gophercloud/v2/openstack"
	_ "github.com/gophercloud/gophercloud/v2/testhelper"
	_ "github.com/vmware/govmomi"
	_ "github.com/vmware/govmomi/simulator"
	_ "github.com/vmware/govmomi/vapi/simulator"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sync/singleflight"
)

package router

// The router imports no backend: the binary chooses them
// (cmd/multicloud-ccm/backends.go). Its tests use the real four, registered
// from their packages' init.
import (
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws"       // type aws.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal" // type baremetal.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/openstack" // type openstack.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/vsphere"   // type vsphere.
)

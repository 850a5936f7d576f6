package router

// The backend types compiled into the provider. Each registers its type and
// config section from init.
import (
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws"       // type aws.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal" // type baremetal.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/openstack" // type openstack.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/vsphere"   // type vsphere.
)

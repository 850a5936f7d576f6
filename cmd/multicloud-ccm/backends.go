package main

// The backend types compiled into the binary: each package registers its
// type, providerID scheme, config section and constructor from init (see
// pkg/backends.Register). A new backend type is one more line here.
import (
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws"       // type aws.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal" // type baremetal.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/openstack" // type openstack.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/vsphere"   // type vsphere.
)

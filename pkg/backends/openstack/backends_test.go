package openstack_test

// The controller tests put a bare-metal backend beside the OpenStack one;
// the router imports no backend, so the tests register it themselves.
import _ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal" // type baremetal.

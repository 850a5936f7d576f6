// Package wire proves on the wire what the bare-metal backend only
// allocates: the built multicloud-ccm binary assigns a Service's addresses
// on a real kube-apiserver, MetalLB's own speaker (built from the Go module
// proxy by hack/metallb/build.sh) announces them in layer 2 from a "node"
// network namespace, and a "client" namespace on the same bridge resolves
// each address, by ARP for IPv4 and neighbour discovery for IPv6, to the
// node's MAC address. Run as root; without network namespaces the tests
// skip, and fail when CI is set.
package wire

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(m.Run()) }

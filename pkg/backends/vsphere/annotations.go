package vsphere

// Node labels of the vSphere backend. InstanceMetadata reports them and the
// cloud-node controller sets them when it initialises a node; they record
// where the node's VM was found, so that a vCenter or datacenter removed
// from the config never makes its nodes look gone. The names are part of
// the user-facing API and never change; docs/vsphere.md describes them.
const (
	// LabelServer (Node label, string, set when the node is initialised;
	// default: none) records the vCenter the node's VM was found in: the
	// server's host name in lower case, with ":port" unless the port is 443.
	// A value that is not a valid label value has its other characters
	// replaced by "_", is cut to 46 characters and ends in "-" and 16 hex
	// digits of the original's SHA-256. While the VM is found in no
	// configured vCenter and this names a vCenter that is not configured,
	// the node is an error (VSphereVCenterNotConfigured), never gone.
	LabelServer = "multicloud-ccm.io/vsphere-server"

	// LabelDatacenter (Node label, string, set when the node is initialised;
	// default: none) records the datacenter the node's VM was found in, as
	// written in vcenters[].datacenters without leading or trailing "/"
	// (encoded like LabelServer when not a valid label value). While the VM
	// is found in no configured vCenter and this names a datacenter that is
	// not configured, the node is an error (VSphereDatacenterNotConfigured),
	// never gone.
	LabelDatacenter = "multicloud-ccm.io/vsphere-datacenter"
)

package vsphere

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// A providerID vsphere://<bios-uuid> does not say which vCenter holds the
// VM. So that removing a vCenter or datacenter from the config never makes
// its nodes look gone, InstanceMetadata records where the VM was found in
// two Node labels (LabelServer, LabelDatacenter, in annotations.go), which
// the cloud-node controller sets when it initialises the node. A lookup
// that finds the VM nowhere answers "gone" only when the recorded vCenter
// and datacenter are configured; otherwise it is an error and the Node
// stays.

// Event reasons of a node recorded in a vCenter or datacenter that is not
// configured.
const (
	// ReasonVCenterNotConfigured: the node's VM was found in a vCenter
	// (LabelServer) that is no longer configured.
	ReasonVCenterNotConfigured = "VSphereVCenterNotConfigured"
	// ReasonDatacenterNotConfigured: the node's VM was found in a datacenter
	// (LabelDatacenter) that is no longer configured in its vCenter.
	ReasonDatacenterNotConfigured = "VSphereDatacenterNotConfigured"
)

// serverRecord is the LabelServer value of a vCenter URL: the host in
// lower case, with its port unless it is 443, so "VC1", "vc1:443" and
// "https://vc1/sdk" record the same vCenter.
func serverRecord(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	if p := u.Port(); p != "" && p != "443" {
		host += ":" + p
	}
	return labelValue(host)
}

// datacenterRecord is the LabelDatacenter value of a configured datacenter.
func datacenterRecord(name string) string {
	return labelValue(strings.Trim(strings.TrimSpace(name), "/"))
}

// labelValue is s when it is a valid label value; otherwise s with every
// character a label value cannot hold replaced by "_", cut to 46
// characters, and followed by "-" and 16 hex digits of s's SHA-256, so
// different names keep different values (e.g. "10.0.0.5:8443" is
// "10.0.0.5_8443-" and the digest).
func labelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	digest := hex.EncodeToString(sum[:])[:16]
	clean := []byte(s)
	for i, b := range clean {
		if !isLabelByte(b) {
			clean[i] = '_'
		}
	}
	trimmed := strings.Trim(string(clean[:min(len(clean), 46)]), "-_.")
	if trimmed == "" {
		return digest
	}
	return trimmed + "-" + digest
}

func isLabelByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.'
}

// recordLabels are the labels recording where vm was found.
func (c *Cloud) recordLabels(vm *vmInfo) map[string]string {
	labels := map[string]string{LabelDatacenter: datacenterRecord(vm.Datacenter)}
	if v := c.vcenterNamed(vm.VCenter); v != nil {
		labels[LabelServer] = v.record
	}
	return labels
}

func (c *Cloud) vcenterNamed(name string) *vcenter {
	for _, v := range c.vcenters {
		if v.name == name {
			return v
		}
	}
	return nil
}

// checkRecord returns an error when the node records a vCenter or a
// datacenter this backend does not serve: its VM was not looked for there,
// so it is not known to be gone. A node without the labels (initialised
// before they were recorded) has its VM looked for in every configured
// vCenter and datacenter, and is gone when none has it.
func (c *Cloud) checkRecord(node *corev1.Node) error {
	server, hasServer := node.Labels[LabelServer]
	dc, hasDC := node.Labels[LabelDatacenter]
	candidates := c.vcenters
	if hasServer {
		candidates = nil
		for _, v := range c.vcenters {
			if v.record == server {
				candidates = append(candidates, v)
			}
		}
		if len(candidates) == 0 {
			return newUserError(ReasonVCenterNotConfigured, "node %s was initialised from vCenter %q (label %s), which backend %s does not configure (vcenters: %s): its VM was not looked for there, so the node is left as it is; add the vCenter back to vcenters, or delete the Node if its VM is gone",
				node.Name, server, LabelServer, c.name, c.configuredServers())
		}
	}
	if !hasDC {
		return nil
	}
	for _, v := range candidates {
		if slices.Contains(v.dcRecords, dc) {
			return nil
		}
	}
	return newUserError(ReasonDatacenterNotConfigured, "node %s was initialised from datacenter %q (label %s) of vCenter %q, which backend %s does not configure there: its VM was not looked for there, so the node is left as it is; add the datacenter back to vcenters[].datacenters, or delete the Node if its VM is gone",
		node.Name, dc, LabelDatacenter, server, c.name)
}

func (c *Cloud) configuredServers() string {
	names := make([]string, 0, len(c.vcenters))
	for _, v := range c.vcenters {
		names = append(names, v.record)
	}
	return strings.Join(names, ", ")
}

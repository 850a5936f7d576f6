package vsphere

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestInstanceType(t *testing.T) {
	tests := []struct {
		vm   vmInfo
		want string
	}{
		{vmInfo{NumCPU: 4, MemoryMB: 8192, GuestID: "ubuntu64Guest"}, "vsphere-vm.cpu-4.mem-8gb.os-ubuntu"},
		{vmInfo{NumCPU: 2, MemoryMB: 1536, GuestID: "rhel8_64Guest"}, "vsphere-vm.cpu-2.mem-1536mb.os-rhel"},
		{vmInfo{NumCPU: 8, MemoryMB: 16384, GuestID: "windows2019srv_64Guest"}, "vsphere-vm.cpu-8.mem-16gb.os-windows"},
		{vmInfo{NumCPU: 1, MemoryMB: 1024, GuestID: "otherGuest"}, "vsphere-vm.cpu-1.mem-1gb.os-other"},
		{vmInfo{NumCPU: 1, MemoryMB: 1024}, "vsphere-vm.cpu-1.mem-1gb.os-unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := instanceType(&tt.vm); got != tt.want {
				t.Errorf("instanceType = %q, want %q", got, tt.want)
			}
		})
	}
}

// rules parses address rules as the config would.
func rules(t *testing.T, r AddressRules) *AddressRules {
	t.Helper()
	if len(r.IPFamilies) == 0 {
		r.IPFamilies = []string{FamilyIPv4}
	}
	if errs := r.Validate(field.NewPath("addresses")); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return &r
}

func TestNodeAddresses(t *testing.T) {
	guest := []guestIP{
		{IP: "fe80::1", Network: "mgmt"},
		{IP: "127.0.0.1", Network: "mgmt"},
		{IP: "169.254.3.3", Network: "mgmt"},
		{IP: "192.168.9.5", Network: "storage"},
		{IP: "10.0.0.5", Network: "pods"},
		{IP: "203.0.113.7", Network: "public"},
		{IP: "2001:db8::5", Network: "pods"},
	}
	in := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a} }
	ex := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: a} }
	host := corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-1"}
	tests := []struct {
		name  string
		rules AddressRules
		ips   []guestIP
		want  []corev1.NodeAddress
	}{
		{"no rules: first usable is both", AddressRules{}, guest, []corev1.NodeAddress{in("192.168.9.5"), ex("192.168.9.5"), host}},
		{"exclude", AddressRules{ExcludeSubnets: []string{"192.168.0.0/16"}}, guest, []corev1.NodeAddress{in("10.0.0.5"), ex("10.0.0.5"), host}},
		{"subnets", AddressRules{InternalSubnets: []string{"10.0.0.0/8"}, ExternalSubnets: []string{"203.0.113.0/24"}}, guest,
			[]corev1.NodeAddress{in("10.0.0.5"), ex("203.0.113.7"), host}},
		{"networks", AddressRules{InternalNetworks: []string{"pods"}, ExternalNetworks: []string{"public"}}, guest,
			[]corev1.NodeAddress{in("10.0.0.5"), ex("203.0.113.7"), host}},
		{"external rule only: internal is another address", AddressRules{ExternalNetworks: []string{"storage"}}, guest,
			[]corev1.NodeAddress{in("10.0.0.5"), ex("192.168.9.5"), host}},
		{"dual stack", AddressRules{InternalNetworks: []string{"pods"}, IPFamilies: []string{FamilyIPv6, FamilyIPv4}}, guest,
			[]corev1.NodeAddress{in("2001:db8::5"), in("10.0.0.5"), ex("2001:db8::5"), ex("10.0.0.5"), host}},
		{"internal rule matches nothing", AddressRules{InternalSubnets: []string{"172.16.0.0/12"}}, guest, nil},
		{"only unusable addresses", AddressRules{}, guest[:3], nil},
		{"primary address without a NIC", AddressRules{}, []guestIP{{IP: "10.9.9.9"}}, []corev1.NodeAddress{in("10.9.9.9"), ex("10.9.9.9"), host}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nodeAddresses(rules(t, tt.rules), &vmInfo{IPs: tt.ips, HostName: "node-1"})
			if !slices.Equal(got, tt.want) {
				t.Errorf("nodeAddresses = %v, want %v", got, tt.want)
			}
		})
	}
}

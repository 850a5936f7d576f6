// Package bmconfigtest holds the bare-metal cloud-config section the tests
// of package bmconfig and of the bare-metal backend parse: two machines of
// the inventory and two address pools, every field of each used.
package bmconfigtest

// ValidSection is a valid baremetal section, as YAML.
const ValidSection = `
inventory:
- name: bm-1
  addresses: [{type: InternalIP, address: 10.0.0.11}, {type: Hostname, address: bm-1}]
  zone: rack-a
  region: dc-1
  instanceType: r650
  labels: {example.com/tier: gold}
- name: bm-2
  addresses: [{type: InternalIP, address: 10.0.0.12}, {type: InternalIP, address: "fd00::12"}]
addressPools:
- name: public
  addresses: ["192.0.2.0/28", "198.51.100.10-198.51.100.20", "2001:db8::/120"]
  namespaces: []
  autoAssign: true
- name: reserved
  addresses: ["203.0.113.0/30"]
  namespaces: [team-a]
  autoAssign: false
`

package baremetal

// AddressPoolAnnotation (Service annotation, string, default: none, meaning every pool
// with autoAssign true that serves the Service's namespace, in config order)
// names the pool of a baremetal backend the Service's addresses come from.
// It may name a pool with autoAssign false. A name no pool has, or a pool
// that does not serve the Service's namespace, is an error (event reason
// UnknownAddressPool or AddressPoolNotAllowed) and nothing is allocated.
const AddressPoolAnnotation = "multicloud-ccm.io/address-pool"

// KubeVIPAnnouncedAnnotation (Service annotation, "true", written by the
// backend, never by users) marks a kube-vip.io/loadbalancerIPs value the
// backend wrote under announce: kube-vip, so that it removes that value on
// release and leaves a value the user wrote alone.
const KubeVIPAnnouncedAnnotation = "multicloud-ccm.io/kube-vip-announced"

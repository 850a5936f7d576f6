package limits

// APIVCenter is the budget's name of a vCenter's APIs: its SOAP API (vim25)
// and the vAPI REST endpoints of the same session (tagging).
const APIVCenter = "vcenter"

// VCenterDefaults are the vSphere backend's default budget, per vCenter
// session. vCenter publishes no request rate, and govc, the vSphere CSI
// driver and the vSphere cloud provider set no client-side rate (the
// providers' only knob, soap-roundtrip-count, is a retry count), so there
// is no figure to take a fraction of. The default is conservative and
// sized to what the backend does: an inventory refresh is three reads per
// datacenter and about three tagging calls, never slowed; what it bounds
// is the per-VM power-state reads cloud-node-lifecycle asks for every 5 s
// of each NotReady node (10 a second: 50 NotReady nodes before any waits)
// and logins (2 a second, a burst of 5: a re-login storm after vCenter
// restarts stays a trickle). Raise it in the backend's rateLimits.
var VCenterDefaults = map[string]RateLimit{
	APIVCenter: {QPS: 10, Bucket: 20, QPSWrite: 2, BucketWrite: 5},
}

package cloudapi

import "github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi/limits"

// APIVCenter is the budget's name of a vCenter's APIs: its SOAP API (vim25)
// and the vAPI REST endpoints of the same session (tagging)
// (limits.APIVCenter).
const APIVCenter = limits.APIVCenter

// VCenterDefaults are the vSphere backend's default budget, per vCenter
// session: limits.VCenterDefaults, the same map, which says how they were
// chosen.
var VCenterDefaults = limits.VCenterDefaults

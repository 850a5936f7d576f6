// Package v1beta1 declares the FRRConfiguration types MetalLB v0.16 imports from
// github.com/metallb/frr-k8s/api/v1beta1 (only the fields it sets), registered
// under the same group/version so its scheme and clients work.
package v1beta1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is frr-k8s's API group and version.
var GroupVersion = schema.GroupVersion{Group: "frrk8s.metallb.io", Version: "v1beta1"}

// SchemeBuilder registers the types; AddToScheme adds them to a scheme.
var (
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &FRRConfiguration{}, &FRRConfigurationList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	AddToScheme = SchemeBuilder.AddToScheme
)

type DynamicASNMode string

type FRRConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              FRRConfigurationSpec `json:"spec,omitempty"`
}

type FRRConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FRRConfiguration `json:"items"`
}

type FRRConfigurationSpec struct {
	BGP          BGPConfig            `json:"bgp,omitempty"`
	NodeSelector metav1.LabelSelector `json:"nodeSelector,omitempty"`
}

type BGPConfig struct {
	Routers     []Router     `json:"routers"`
	BFDProfiles []BFDProfile `json:"bfdProfiles,omitempty"`
}

type Router struct {
	ASN       uint32     `json:"asn"`
	ID        string     `json:"id,omitempty"`
	VRF       string     `json:"vrf,omitempty"`
	Neighbors []Neighbor `json:"neighbors,omitempty"`
	Prefixes  []string   `json:"prefixes,omitempty"`
}

type Neighbor struct {
	ASN                    uint32           `json:"asn,omitempty"`
	DynamicASN             DynamicASNMode   `json:"dynamicASN,omitempty"`
	Address                string           `json:"address,omitempty"`
	Interface              string           `json:"interface,omitempty"`
	Port                   *uint16          `json:"port,omitempty"`
	Password               string           `json:"password,omitempty"`
	PasswordSecret         SecretReference  `json:"passwordSecret,omitempty"`
	HoldTime               *metav1.Duration `json:"holdTime,omitempty"`
	KeepaliveTime          *metav1.Duration `json:"keepaliveTime,omitempty"`
	ConnectTime            *metav1.Duration `json:"connectTime,omitempty"`
	EBGPMultiHop           bool             `json:"ebgpMultiHop,omitempty"`
	BFDProfile             string           `json:"bfdProfile,omitempty"`
	EnableGracefulRestart  bool             `json:"enableGracefulRestart,omitempty"`
	ToAdvertise            Advertise        `json:"toAdvertise,omitempty"`
	DualStackAddressFamily bool             `json:"dualStackAddressFamily,omitempty"`
	// Deprecated: kept because MetalLB sets it.
	DisableMP bool `json:"disableMP,omitempty"`
}

type SecretReference struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

type Advertise struct {
	Allowed                   AllowedOutPrefixes      `json:"allowed,omitempty"`
	PrefixesWithLocalPref     []LocalPrefPrefixes     `json:"withLocalPref,omitempty"`
	PrefixesWithCommunity     []CommunityPrefixes     `json:"withCommunity,omitempty"`
	PrefixesWithAsPathPrepend []AsPathPrependPrefixes `json:"withAsPathPrepend,omitempty"`
}

type AllowedOutPrefixes struct {
	Prefixes []string `json:"prefixes,omitempty"`
	Mode     string   `json:"mode,omitempty"`
}

type LocalPrefPrefixes struct {
	Prefixes  []string `json:"prefixes,omitempty"`
	LocalPref uint32   `json:"localPref,omitempty"`
}

type CommunityPrefixes struct {
	Prefixes  []string `json:"prefixes,omitempty"`
	Community string   `json:"community,omitempty"`
}

type AsPathPrependPrefixes struct {
	Prefixes      []string `json:"prefixes,omitempty"`
	AsPathPrepend uint8    `json:"asPathPrepend,omitempty"`
}

type BFDProfile struct {
	Name             string  `json:"name"`
	ReceiveInterval  *uint32 `json:"receiveInterval,omitempty"`
	TransmitInterval *uint32 `json:"transmitInterval,omitempty"`
	DetectMultiplier *uint32 `json:"detectMultiplier,omitempty"`
	EchoInterval     *uint32 `json:"echoInterval,omitempty"`
	EchoMode         *bool   `json:"echoMode,omitempty"`
	PassiveMode      *bool   `json:"passiveMode,omitempty"`
	MinimumTTL       *uint32 `json:"minimumTtl,omitempty"`
}

// The deep copies go through JSON: every field is JSON-tagged plain data.
func jsonCopy(in, out any) {
	b, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
}

func (in *FRRConfigurationSpec) DeepCopyInto(out *FRRConfigurationSpec) { jsonCopy(in, out) }

func (in *FRRConfiguration) DeepCopyInto(out *FRRConfiguration) { jsonCopy(in, out) }

func (in *FRRConfiguration) DeepCopy() *FRRConfiguration {
	if in == nil {
		return nil
	}
	out := new(FRRConfiguration)
	in.DeepCopyInto(out)
	return out
}

func (in *FRRConfiguration) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *FRRConfigurationList) DeepCopyInto(out *FRRConfigurationList) { jsonCopy(in, out) }

func (in *FRRConfigurationList) DeepCopy() *FRRConfigurationList {
	if in == nil {
		return nil
	}
	out := new(FRRConfigurationList)
	in.DeepCopyInto(out)
	return out
}

func (in *FRRConfigurationList) DeepCopyObject() runtime.Object { return in.DeepCopy() }

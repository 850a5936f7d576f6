package vsid

import (
	"slices"
	"strings"
	"testing"
)

func TestUUIDFromProviderID(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "vsphere://4237c7d5-3b7e-4c26-9a0e-8f3c1a2b3c4d", want: "4237c7d5-3b7e-4c26-9a0e-8f3c1a2b3c4d"},
		{in: "vsphere://4237C7D5-3B7E-4C26-9A0E-8F3C1A2B3C4D", want: "4237c7d5-3b7e-4c26-9a0e-8f3c1a2b3c4d"},
		{in: "vsphere:///4237c7d5-3b7e-4c26-9a0e-8f3c1a2b3c4d", wantErr: true},
		{in: "vsphere://vm-42", wantErr: true},
		{in: "aws:///us-east-1a/i-1", wantErr: true},
		{in: "4237c7d5-3b7e-4c26-9a0e-8f3c1a2b3c4d", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := UUIDFromProviderID(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("UUIDFromProviderID(%q) = %q, %v", tt.in, got, err)
			}
			if err != nil && !strings.Contains(err.Error(), "vsphere://<bios-uuid>") {
				t.Errorf("error %q does not say what a providerID looks like", err)
			}
		})
	}
}

func TestSystemUUIDs(t *testing.T) {
	// The example of the upstream vSphere provider: SMBIOS before 2.6
	// reports the first three fields byte-swapped.
	got := SystemUUIDs("56492E42-22AD-3911-6D72-59CC8F26BC90")
	want := []string{"56492e42-22ad-3911-6d72-59cc8f26bc90", "422e4956-ad22-1139-6d72-59cc8f26bc90"}
	if !slices.Equal(got, want) {
		t.Errorf("SystemUUIDs = %v, want %v", got, want)
	}
	if got := SystemUUIDs("not-a-uuid"); got != nil {
		t.Errorf("SystemUUIDs(garbage) = %v, want none", got)
	}
}

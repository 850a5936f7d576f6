package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/component-base/version/verflag"
)

// TestVersionFlag runs the command's flag parsing and RunE as cli.Run does:
// --version prints the product's name and version, not upstream's
// "Kubernetes v0.0.0-master", and does not start the controller manager.
func TestVersionFlag(t *testing.T) {
	errStarted := errors.New("started")
	cmd := &cobra.Command{Use: "multicloud-ccm", RunE: func(*cobra.Command, []string) error { return errStarted }}
	verflag.AddFlags(cmd.Flags())
	var out bytes.Buffer
	withProductVersion(cmd, &out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("--version: %v", err)
	}
	got := out.String()
	if !strings.HasPrefix(got, "multicloud-ccm ") || strings.Contains(got, "Kubernetes") || !strings.Contains(got, "k8s.io/cloud-provider") {
		t.Errorf("--version printed %q, want \"multicloud-ccm <version> (k8s.io/cloud-provider ...)\"", got)
	}

	cmd.SetArgs([]string{"--version=false"})
	if err := cmd.Execute(); !errors.Is(err, errStarted) {
		t.Errorf("without --version the command's own RunE must run, got %v", err)
	}
}

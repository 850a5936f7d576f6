package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"k8s.io/component-base/version"
)

// productName is what --version prints before the version.
const productName = "multicloud-ccm"

// withProductVersion makes --version print this product's version (set at
// build time with -X k8s.io/component-base/version.gitVersion, as make build
// and the Dockerfile do) instead of upstream's "Kubernetes vX". --version=raw
// keeps upstream's detailed output.
func withProductVersion(cmd *cobra.Command, out io.Writer) {
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if f := c.Flags().Lookup("version"); f != nil && f.Value.String() == "true" {
			_, err := fmt.Fprintln(out, versionString())
			return err
		}
		return run(c, args)
	}
}

// versionString is e.g. "multicloud-ccm v0.3.0 (k8s.io/cloud-provider
// v0.37.2, go1.26.8 linux/amd64)".
func versionString() string {
	return fmt.Sprintf("%s %s (k8s.io/cloud-provider %s, %s %s/%s)", productName, version.Get().GitVersion,
		moduleVersion("k8s.io/cloud-provider"), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// moduleVersion is the version of the dependency path compiled in, or
// "unknown".
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "unknown"
}

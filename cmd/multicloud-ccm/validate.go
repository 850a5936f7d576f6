package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

func newConfigCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with the multicloud-ccm cloud-config file",
	}
	cmd.AddCommand(newValidateCommand())
	// The upstream root command prints every CCM flag in its help; these
	// subcommands take only their own.
	plain := &cobra.Command{}
	cmd.SetHelpFunc(plain.HelpFunc())
	cmd.SetUsageFunc(plain.UsageFunc())
	return cmd
}

func newValidateCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "validate --cloud-config FILE",
		Short: "Check a cloud-config file offline and print every problem",
		Long: `Validate reads the cloud-config file the way the running controller
would: strict YAML decoding (an unknown or misspelt key is an error naming its
path), defaults, and validation of every backend section. It prints every
problem it finds, one per line with its field path, and exits non-zero if
there is any. It contacts no cloud and no API server; credentials are checked
for shape, not for validity.

Backend types compiled in: ` + strings.Join(backends.Types(), ", ") + ".",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return errors.New("--cloud-config is required")
			}
			return validate(cmd.OutOrStdout(), cmd.ErrOrStderr(), path)
		},
	}
	cmd.Flags().StringVar(&path, "cloud-config", "", "path of the cloud-config file to check")
	return cmd
}

func validate(stdout, stderr io.Writer, path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		problems := flatten(err)
		for _, p := range problems {
			fmt.Fprintf(stderr, "%s\n", p)
		}
		return fmt.Errorf("%s: %d problem(s)", path, len(problems))
	}
	fmt.Fprintf(stdout, "%s: valid (cluster %s, %d backend(s))\n", path, cfg.ClusterID, len(cfg.Backends))
	return nil
}

// flatten lists the individual problems in a (possibly aggregated) error.
func flatten(err error) []string {
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		var out []string
		for _, e := range agg.Errors() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []string{strings.TrimSpace(err.Error())}
}

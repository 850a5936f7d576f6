package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

func newConfigCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with the multicloud-ccm cloud-config file",
		// A command-line checker logs nothing: having a pre-run of its own
		// keeps the upstream command's log set-up (and its "command
		// failed" log line) away from these subcommands.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(newValidateCommand())
	plainHelp(cmd)
	return cmd
}

// plainHelp makes cmd print only its own flags in its help: the upstream
// root command prints every controller flag.
func plainHelp(cmd *cobra.Command) {
	plain := &cobra.Command{}
	cmd.SetHelpFunc(plain.HelpFunc())
	cmd.SetUsageFunc(plain.UsageFunc())
}

func newValidateCommand() *cobra.Command {
	var path, output string
	cmd := &cobra.Command{
		Use:   "validate --cloud-config FILE",
		Short: "Check a cloud-config file offline and print every problem",
		Long: `Validate reads the cloud-config file the way the running controller
would: strict YAML decoding (an unknown or misspelt key is an error naming its
field path, so is a value of the wrong type, and the rest of the file is
still checked), defaults, and validation of every backend section. It prints
every problem it finds in one run, one per line with its field path, and
exits non-zero (status 1) if there is any; it logs nothing. With
--output json it prints one JSON object instead, for CI pipelines. It
contacts no cloud and no API server; credentials are checked for shape, not
for validity.

Backend types compiled in: ` + strings.Join(backends.Types(), ", ") + ".",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return errors.New("--cloud-config is required")
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("--output must be text or json, not %q", output)
			}
			return validate(cmd.OutOrStdout(), cmd.ErrOrStderr(), path, output == "json")
		},
	}
	cmd.Flags().StringVar(&path, "cloud-config", "", "path of the cloud-config file to check")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text (problems on standard error) or json (one object on standard output)")
	return cmd
}

// report is what --output json prints.
type report struct {
	// File is the path checked, as given.
	File string `json:"file"`
	// Valid is true when there is no problem.
	Valid bool `json:"valid"`
	// ClusterID and Backends summarise a valid file.
	ClusterID string `json:"clusterID,omitempty"`
	Backends  int    `json:"backends,omitempty"`
	// Problems lists every problem found; empty when valid.
	Problems []problem `json:"problems"`
}

// problem is one problem of a cloud-config file.
type problem struct {
	// Field is the field path, e.g. backends[0].aws.region; empty for a
	// problem of the file as a whole (not YAML, a repeated key).
	Field string `json:"field"`
	// Type is the kind of problem: the validation error type
	// (FieldValueRequired, FieldValueInvalid, ...) or FileInvalid.
	Type string `json:"type"`
	// Message says what is wrong and how to fix it.
	Message string `json:"message"`
	text    string
}

func validate(stdout, stderr io.Writer, path string, asJSON bool) error {
	cfg, err := config.Load(path)
	rep := report{File: path, Valid: err == nil, Problems: []problem{}}
	if err != nil {
		rep.Problems = problems(err)
	} else {
		rep.ClusterID, rep.Backends = cfg.ClusterID, len(cfg.Backends)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printText(stdout, stderr, rep)
	}
	if !rep.Valid {
		return fmt.Errorf("%s: %d problem(s)", path, len(rep.Problems))
	}
	return nil
}

func printText(stdout, stderr io.Writer, rep report) {
	if rep.Valid {
		fmt.Fprintf(stdout, "%s: valid (cluster %s, %d backend(s))\n", rep.File, rep.ClusterID, rep.Backends)
		return
	}
	for _, p := range rep.Problems {
		fmt.Fprintln(stderr, p.text)
	}
}

// problems lists the individual problems in a (possibly aggregated) error.
func problems(err error) []problem {
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		var out []problem
		for _, e := range agg.Errors() {
			out = append(out, problems(e)...)
		}
		return out
	}
	text := strings.TrimSpace(err.Error())
	var fe *field.Error
	var file *config.FileError
	switch {
	case errors.As(err, &fe):
		return []problem{{Field: fe.Field, Type: string(fe.Type), Message: fe.ErrorBody(), text: text}}
	case errors.As(err, &file):
		return []problem{{Type: "FileInvalid", Message: file.Problem, text: text}}
	}
	return []problem{{Type: "FileInvalid", Message: text, text: text}}
}

// problemTexts lists the individual problems in a (possibly aggregated)
// error as the text validate prints, one per problem.
func problemTexts(err error) []string {
	ps := problems(err)
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.text
	}
	return out
}

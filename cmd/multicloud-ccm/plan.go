package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
)

// planClient builds the plan's Kubernetes client (a variable for tests).
var planClient = statusClient

// errPlanFails is returned (exit status 1) when the plan would delete a
// Node (now, or the first time it is not Ready), delete or replace a load
// balancer, or refuse something.
var errPlanFails = errors.New("plan: something would be deleted, replaced or refused (see above)")

func newPlanCommand() *cobra.Command {
	var kubeconfig, cloudConfig, output, clusterName string
	cmd := &cobra.Command{
		Use:   "plan --cloud-config FILE [--kubeconfig FILE] [-o table|json|yaml]",
		Short: "Show, read-only, what the CCM would do to this cluster if it started now",
		Long: `Plan reads the cluster's Nodes and Services from the API server the
kubeconfig names (--kubeconfig, else $KUBECONFIG, else ~/.kube/config) and
asks the clouds of the cloud-config, read-only, what multicloud-ccm would do
if it started now: per Node the backend that would own it and why (label,
scheme, rule, claim), whether it finds the instance, the Nodes it refuses,
the Nodes of platforms it does not serve (KEP-5778: nodes.platforms,
--cloud-provider-platforms), left to the CCM of their platform, and, loudly,
any Node the node-lifecycle controller would delete; per
LoadBalancer Service the backend and why (class, annotation, default),
whether its existing load balancer would be adopted in place, created or
replaced, the cloud calls it would make, and every annotation unknown,
malformed or not honoured by that backend. It ends with a summary line.

Every backend runs its own reconcile in a dry run: it records its mutating
calls instead of making them, and its cloud SDK refuses any that would
slip through. Nothing is written to the API server. Exit status 1 when
something would be deleted, replaced or refused; 0 otherwise.`,
		Args:              cobra.NoArgs,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cloudConfig == "" {
				return errors.New("--cloud-config is required")
			}
			if output != "table" && output != "json" && output != "yaml" {
				return fmt.Errorf("--output must be table, json or yaml, not %q", output)
			}
			cfg, err := config.Load(cloudConfig)
			if err != nil {
				return fmt.Errorf("--cloud-config %s: %w", cloudConfig, err)
			}
			client, err := planClient(kubeconfig)
			if err != nil {
				return err
			}
			rep, err := plan.Run(cmd.Context(), plan.Options{Config: cfg, Client: client, ClusterName: clusterName})
			if err != nil {
				return err
			}
			if err := printPlan(cmd.OutOrStdout(), rep, output); err != nil {
				return err
			}
			if rep.Summary.Failed() {
				return errPlanFails
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cloudConfig, "cloud-config", "", "path of the cloud-config the CCM would start with")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "path of the kubeconfig (default: $KUBECONFIG, else ~/.kube/config)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml")
	cmd.Flags().StringVar(&clusterName, "cluster-name", plan.ClusterName, "the CCM's --cluster-name")
	cmd.Flags().Var(platformsFlag{}, config.PlatformsFlag, "the CCM's --"+config.PlatformsFlag+" (KEP-5778): the nodes of every other platform are left to other CCMs")
	plainHelp(cmd)
	return cmd
}

// printPlan prints the report as a table (with the summary line last) or
// as JSON or YAML.
func printPlan(w io.Writer, rep *plan.Report, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case "yaml":
		out, err := yaml.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	printNodePlans(w, rep.Nodes)
	fmt.Fprintln(w)
	printServicePlans(w, rep.Services)
	fmt.Fprintln(w)
	_, err := fmt.Fprintln(w, rep.Summary.String())
	return err
}

func printNodePlans(w io.Writer, nodes []plan.NodePlan) {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NODE\tBACKEND\tCHOSEN BY\tINSTANCE\tOUTCOME\tDETAIL")
	for _, n := range nodes {
		found := "not found"
		switch {
		case n.InstanceFound:
			found = "found"
		case n.Outcome == plan.NodeOtherCCM:
			found = "-" // not ours to ask about
		}
		detail := n.Error
		switch {
		case n.NewProviderID != "":
			detail = "providerID " + n.NewProviderID
		case n.Outcome == plan.NodeDeleted:
			detail = "the instance is gone: the node-lifecycle controller deletes the Node (" + n.ProviderID + ")"
		case n.Outcome == plan.NodeGoneReady:
			detail = "the instance is gone but the Node is Ready: the node-lifecycle controller deletes it the first time it is not Ready (" + n.ProviderID + ")"
		case n.Outcome == plan.NodeOtherCCM:
			detail = "left to the CCM of platform " + n.Platform
		case n.Shutdown:
			detail = "shut down"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, dash(n.Backend), dash(n.ChosenBy), found, n.Outcome, dash(detail))
	}
	_ = tw.Flush()
}

func printServicePlans(w io.Writer, services []plan.ServicePlan) {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tBACKEND\tCHOSEN BY\tOUTCOME\tCHANGES\tADDRESS")
	for _, s := range services {
		addr := dash(s.Address)
		// A Service refused by every backend keeps its address; one refused
		// by some of its backends is served by the others (s.RefusedBy).
		if s.NewAddress != s.Address && s.Outcome != plan.LBElsewhere && (s.Outcome != plan.LBRefused || s.NewAddress != "") {
			addr += " -> " + dash(s.NewAddress)
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%d\t%s\n", s.Namespace, s.Name, dash(s.Backend), dash(s.ChosenBy), s.Outcome, len(s.Changes), addr)
	}
	_ = tw.Flush()
	for _, s := range services {
		lines := serviceDetails(s)
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s/%s:\n", s.Namespace, s.Name)
		for _, l := range lines {
			fmt.Fprintln(w, "  "+l)
		}
	}
}

// serviceDetails are a Service's adoption, changes, annotation issues and
// error, one line each.
func serviceDetails(s plan.ServicePlan) []string {
	var out []string
	for _, in := range s.Adoption {
		out = append(out, "adopt:  "+in.What+" ("+in.Call+")")
	}
	for _, in := range s.Changes {
		kind := "change"
		if in.Kind != "" {
			kind = strings.ToUpper(string(in.Kind))
		}
		out = append(out, kind+": "+in.What+" ("+in.Call+")")
	}
	for _, a := range s.Annotations {
		out = append(out, fmt.Sprintf("annotation %s=%q: %s: %s", a.Annotation, a.Value, a.Problem, a.Detail))
	}
	if len(s.RefusedBy) > 0 {
		out = append(out, "refused by: "+strings.Join(s.RefusedBy, ", "))
	}
	if len(s.HandedOver) > 0 {
		out = append(out, "left to another controller by: "+strings.Join(s.HandedOver, ", ")+" (its load balancer there is kept, its address leaves the status)")
	}
	if s.Error != "" {
		out = append(out, "error: "+s.Error)
	}
	return out
}

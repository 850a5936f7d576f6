package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/statuspublisher"
)

func newStatusCommand() *cobra.Command {
	var kubeconfig, output, namespace string
	cmd := &cobra.Command{
		Use:   "status [--kubeconfig FILE] [-o table|json|yaml]",
		Short: "Show where nodes and load balancers went, read from the API server",
		Long: `Status shows the routing at a glance, read-only, from the API server the
kubeconfig names (--kubeconfig, else $KUBECONFIG, else ~/.kube/config): the
backends with the nodes and load balancers they serve; the nodes by backend
with their providerID, zone and latest Warning event, and "left to the CCM
of platform X" for a node of another CCM (KEP-5778): unlabelled by us, of a
platform no published backend's type serves, and either annotated
cloudprovider.kubernetes.io/platform (no providerID) or initialised by
someone else (plan, which reads the cloud-config, answers from the router
itself); the LoadBalancer Services by backend, how the backend was chosen (class, annotation or the
default), their address and the cloud's load-balancer ID; the bare-metal
address pools' usage. It reads what the CCM writes on the objects: the Node
label multicloud-ccm.io/backend and the Service annotations
multicloud-ccm.io/load-balancer-served-by,
multicloud-ccm.io/load-balancer-id and multicloud-ccm.io/load-balancer-draining
(a Service served by several backends has a row per backend, with its
state: serving, or draining until its load balancer is deleted); and the backends' type, health (up or
down, the last successful call, the last error) and pools from the
ConfigMap multicloud-ccm-status the CCM's leader publishes in its namespace
(--namespace).`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		// No log set-up: a command-line reader logs nothing.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" && output != "yaml" {
				return fmt.Errorf("--output must be table, json or yaml, not %q", output)
			}
			client, err := statusClient(kubeconfig)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			st, err := readStatus(ctx, client, namespace)
			if err != nil {
				return err
			}
			if st.note != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), st.note)
			}
			return printStatus(cmd.OutOrStdout(), st, output, time.Now())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "path of the kubeconfig (default: $KUBECONFIG, else ~/.kube/config)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", statuspublisher.DefaultNamespace, "the CCM's namespace, where it publishes the ConfigMap "+statuspublisher.ConfigMapName)
	plainHelp(cmd)
	return cmd
}

func statusClient(kubeconfig string) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(cfg)
}

// status is what the status command shows (and prints as JSON or YAML).
type status struct {
	Backends []backendStatus `json:"backends"`
	Nodes    []nodeStatus    `json:"nodes"`
	Services []serviceStatus `json:"loadBalancers"`
	Pools    []poolStatus    `json:"pools"`
	// note says why the backends' health is unknown, if it is.
	note string
}

// backendStatus is one backend as the objects and the published status
// show it.
type backendStatus struct {
	Name          string `json:"name"`
	Type          string `json:"type,omitempty"`
	Nodes         int    `json:"nodes"`
	LoadBalancers int    `json:"loadBalancers"`
	// Health is the published health; nil when none is published.
	Health *statuspublisher.Health `json:"health,omitempty"`
}

// poolStatus is the usage of one IP family of a bare-metal address pool.
type poolStatus struct {
	Backend string `json:"backend"`
	backends.PoolUsage
}

// nodeStatus is one Node.
type nodeStatus struct {
	Backend    string `json:"backend"`
	Name       string `json:"name"`
	ProviderID string `json:"providerID"`
	Zone       string `json:"zone"`
	Warning    string `json:"warning,omitempty"`
	// OtherCCM is, for a Node another CCM owns (otherCCM), its platform:
	// the node is left to that platform's CCM.
	OtherCCM string `json:"otherCCM,omitempty"`
}

// serviceStatus is one LoadBalancer Service.
type serviceStatus struct {
	Backend        string `json:"backend"`
	Namespace      string `json:"namespace"`
	Name           string `json:"name"`
	ChosenBy       string `json:"chosenBy"`
	Address        string `json:"address"`
	LoadBalancerID string `json:"loadBalancerID,omitempty"`
	// State is set for a Service with several backends (serving or
	// draining): "serving", or "draining" until DrainingUntil, when its
	// load balancer in this backend is deleted.
	State         string       `json:"state,omitempty"`
	DrainingUntil *metav1.Time `json:"drainingUntil,omitempty"`
}

func readStatus(ctx context.Context, client kubernetes.Interface, namespace string) (*status, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	services, err := client.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing services: %w", err)
	}
	warnings, err := nodeWarnings(ctx, client)
	if err != nil {
		return nil, err
	}
	published, note, err := readPublished(ctx, client, namespace)
	if err != nil {
		return nil, err
	}
	st := &status{Backends: []backendStatus{}, Nodes: []nodeStatus{}, Services: []serviceStatus{}, Pools: []poolStatus{}, note: note}
	counts := map[string]*backendStatus{}
	count := func(name string) *backendStatus {
		if counts[name] == nil {
			counts[name] = &backendStatus{Name: name}
		}
		return counts[name]
	}
	served := servedPlatforms(published)
	for i := range nodes.Items {
		n := &nodes.Items[i]
		ns := nodeStatus{Backend: n.Labels[string(annotation.NodeBackend)], Name: n.Name, ProviderID: n.Spec.ProviderID,
			Zone: n.Labels[corev1.LabelTopologyZone], Warning: warnings[n.Name], OtherCCM: otherCCM(n, served)}
		st.Nodes = append(st.Nodes, ns)
		if ns.Backend != "" {
			count(ns.Backend).Nodes++
		}
	}
	for i := range services.Items {
		s := &services.Items[i]
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		for _, ss := range servicesOf(s) {
			st.Services = append(st.Services, ss)
			if ss.Backend != "" && ss.State != stateDraining {
				count(ss.Backend).LoadBalancers++
			}
		}
	}
	for _, p := range published {
		b := count(p.Name)
		b.Type, b.Health = p.Type, &p.Health
		for _, u := range p.Pools {
			st.Pools = append(st.Pools, poolStatus{Backend: p.Name, PoolUsage: u})
		}
	}
	for _, b := range counts {
		st.Backends = append(st.Backends, *b)
	}
	sortStatus(st)
	return st, nil
}

// servedPlatforms are the platforms (KEP-5778) the published backends'
// types serve: each type and its providerID scheme; nil when nothing is
// published (not known).
func servedPlatforms(published []statuspublisher.NamedBackend) map[string]bool {
	if published == nil {
		return nil
	}
	out := map[string]bool{}
	for _, p := range published {
		out[p.Type] = true
		if reg, ok := backends.Lookup(p.Type); ok && reg.Scheme != "" {
			out[reg.Scheme] = true
		}
	}
	return out
}

// otherCCM returns the platform of a Node another CCM owns, as the API
// server shows it (KEP-5778, docs/routing.md "Whose a node is"): no
// multicloud-ccm.io/backend label (we label every node we initialise), a
// platform that no published backend's type serves, and either no
// providerID (the platform is its cloudprovider.kubernetes.io/platform
// annotation) or a providerID while initialised (someone else initialised
// it: the router never initialises a node of a scheme it does not serve).
// A tainted node whose providerID scheme no backend serves is decided by
// the CCM's nodes.unmanaged unless its served platforms are declared, which
// is not published: "" (its Warning, if any, shows what the CCM said).
// "" too for our nodes, nodes naming no platform, and when the published
// status is not there (served nil: not known). `plan`, which reads the
// cloud-config, answers from the router itself.
func otherCCM(n *corev1.Node, served map[string]bool) string {
	if served == nil || n.Labels[string(annotation.NodeBackend)] != "" {
		return ""
	}
	p := providerid.NodePlatform(n)
	if p == "" || served[p] || (n.Spec.ProviderID != "" && uninitialised(n)) {
		return ""
	}
	return p
}

// uninitialised reports whether n still carries the external cloud
// provider's uninitialized taint.
func uninitialised(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider })
}

// readPublished reads the backends' status the CCM publishes. A ConfigMap
// that is not there, or not readable, leaves the health unknown, with a
// note saying why.
func readPublished(ctx context.Context, client kubernetes.Interface, namespace string) ([]statuspublisher.NamedBackend, string, error) {
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, statuspublisher.ConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("Health unknown: no ConfigMap %s/%s (is the CCM running, its leader elected, and --namespace its namespace?)", namespace, statuspublisher.ConfigMapName), nil
	case apierrors.IsForbidden(err):
		return nil, fmt.Sprintf("Health unknown: reading ConfigMap %s/%s is forbidden: %v", namespace, statuspublisher.ConfigMapName, err), nil
	case err != nil:
		return nil, "", fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, statuspublisher.ConfigMapName, err)
	}
	published, err := statuspublisher.Decode(cm)
	if err != nil {
		return nil, "", err
	}
	return published, "", nil
}

const (
	stateServing  = "serving"
	stateDraining = "draining"
)

// servicesOf is one row per backend of the Service: each serving backend
// (multicloud-ccm.io/load-balancer-served-by, in order) and each whose load
// balancer drains (multicloud-ccm.io/load-balancer-draining); one row with
// no backend for a Service not served yet. State is set only when the
// Service has several backends.
func servicesOf(s *corev1.Service) []serviceStatus {
	base := serviceOf(s)
	served := splitList(s.Annotations[string(annotation.LoadBalancerServedBy)])
	draining := drainingOf(s)
	if len(served)+len(draining) <= 1 && len(draining) == 0 {
		return []serviceStatus{base}
	}
	ids := idsOf(s.Annotations[string(annotation.LoadBalancerID)], served)
	var out []serviceStatus
	for _, b := range served {
		row := base
		row.Backend, row.LoadBalancerID, row.State = b, ids[b], stateServing
		out = append(out, row)
	}
	for _, d := range draining {
		row := base
		row.Backend, row.LoadBalancerID, row.State, row.DrainingUntil = d.backend, "", stateDraining, &metav1.Time{Time: d.until}
		out = append(out, row)
	}
	return out
}

type drain struct {
	backend string
	until   time.Time
}

// drainingOf reads multicloud-ccm.io/load-balancer-draining: backend=RFC 3339
// end, comma-separated.
func drainingOf(s *corev1.Service) []drain {
	var out []drain
	for _, e := range splitList(s.Annotations[string(annotation.LoadBalancerDraining)]) {
		name, at, ok := strings.Cut(e, "=")
		if t, err := time.Parse(time.RFC3339, at); ok && err == nil {
			out = append(out, drain{backend: name, until: t})
		}
	}
	return out
}

// idsOf maps the serving backends to their load balancers' IDs:
// multicloud-ccm.io/load-balancer-id is backend=ID pairs when several
// backends serve, else the one backend's ID.
func idsOf(v string, served []string) map[string]string {
	out := map[string]string{}
	for _, e := range splitList(v) {
		if name, id, ok := strings.Cut(e, "="); ok && slices.Contains(served, name) {
			out[name] = id
		}
	}
	if len(out) == 0 && len(served) == 1 {
		out[served[0]] = v
	}
	return out
}

func splitList(v string) []string {
	var out []string
	for e := range strings.SplitSeq(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func serviceOf(s *corev1.Service) serviceStatus {
	ss := serviceStatus{Backend: s.Annotations[string(annotation.LoadBalancerServedBy)], Namespace: s.Namespace, Name: s.Name,
		ChosenBy: "default", LoadBalancerID: s.Annotations[string(annotation.LoadBalancerID)]}
	switch {
	case s.Spec.LoadBalancerClass != nil:
		ss.ChosenBy = "class " + *s.Spec.LoadBalancerClass
	case s.Annotations[string(annotation.LoadBalancerBackend)] != "":
		ss.ChosenBy = "annotation"
	}
	var addrs []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		addrs = append(addrs, in.IP+in.Hostname)
	}
	ss.Address = strings.Join(addrs, ",")
	return ss
}

// nodeWarnings returns each Node's latest Warning event's reason and
// message.
func nodeWarnings(ctx context.Context, client kubernetes.Interface) (map[string]string, error) {
	events, err := client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("type", corev1.EventTypeWarning),
			fields.OneTermEqualSelector("involvedObject.kind", "Node")).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	latest := map[string]corev1.Event{}
	for _, e := range events.Items {
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.Kind != "Node" {
			continue // a server that ignored the field selector
		}
		name := e.InvolvedObject.Name
		if cur, ok := latest[name]; !ok || eventTime(e).After(eventTime(cur)) {
			latest[name] = e
		}
	}
	out := map[string]string{}
	for name, e := range latest {
		out[name] = e.Reason + ": " + e.Message
	}
	return out, nil
}

func eventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}

func sortStatus(st *status) {
	slices.SortFunc(st.Backends, func(a, b backendStatus) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(st.Nodes, func(a, b nodeStatus) int {
		return strings.Compare(a.Backend+"\x00"+a.Name, b.Backend+"\x00"+b.Name)
	})
	slices.SortFunc(st.Services, func(a, b serviceStatus) int {
		return strings.Compare(a.Backend+"\x00"+a.Namespace+"/"+a.Name, b.Backend+"\x00"+b.Namespace+"/"+b.Name)
	})
	slices.SortStableFunc(st.Pools, func(a, b poolStatus) int { return strings.Compare(a.Backend, b.Backend) })
}

// printStatus prints st as tables (times as ages at now), JSON or YAML.
func printStatus(w io.Writer, st *status, output string, now time.Time) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	case "yaml":
		out, err := yaml.Marshal(st)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tTYPE\tHEALTH\tNODES\tLOAD BALANCERS\tLAST SUCCESS\tLAST ERROR")
	for _, b := range st.Backends {
		health, ok, failed := healthColumns(b.Health, now)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", b.Name, dash(b.Type), health, b.Nodes, b.LoadBalancers, ok, failed)
	}
	fmt.Fprintln(tw, "\nBACKEND\tNODE\tPROVIDER ID\tZONE\tDETAIL")
	for _, n := range st.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", dash(n.Backend), n.Name, dash(n.ProviderID), dash(n.Zone), nodeDetail(n))
	}
	printServices(tw, st.Services, now)
	if len(st.Pools) > 0 {
		fmt.Fprintln(tw, "\nBACKEND\tPOOL\tFAMILY\tUSED/SIZE")
		for _, p := range st.Pools {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\n", p.Backend, p.Pool, p.Family, p.Used, p.Size)
		}
	}
	return tw.Flush()
}

// nodeDetail is the nodes table's last column: whose the node is when
// another CCM owns it, and its latest Warning event.
func nodeDetail(n nodeStatus) string {
	var parts []string
	if n.OtherCCM != "" {
		parts = append(parts, "left to the CCM of platform "+n.OtherCCM)
	}
	if n.Warning != "" {
		parts = append(parts, n.Warning)
	}
	return dash(strings.Join(parts, "; "))
}

// printServices prints the Services table; with a STATE column when a
// Service has several backends (serving, or draining until when).
func printServices(tw io.Writer, services []serviceStatus, now time.Time) {
	withState := slices.ContainsFunc(services, func(s serviceStatus) bool { return s.State != "" })
	if withState {
		fmt.Fprintln(tw, "\nBACKEND\tSERVICE\tCHOSEN BY\tADDRESS\tLOAD BALANCER ID\tSTATE")
	} else {
		fmt.Fprintln(tw, "\nBACKEND\tSERVICE\tCHOSEN BY\tADDRESS\tLOAD BALANCER ID")
	}
	for _, s := range services {
		row := fmt.Sprintf("%s\t%s/%s\t%s\t%s\t%s", dash(s.Backend), s.Namespace, s.Name, s.ChosenBy, dash(s.Address), dash(s.LoadBalancerID))
		if withState {
			row += "\t" + stateColumn(s, now)
		}
		fmt.Fprintln(tw, row)
	}
}

// stateColumn is "serving", "draining until <time> (<age> left)" or "-".
func stateColumn(s serviceStatus, now time.Time) string {
	if s.State == stateDraining && s.DrainingUntil != nil {
		left := "ended"
		if s.DrainingUntil.After(now) {
			left = age(s.DrainingUntil.Time, now) + " left"
		}
		return fmt.Sprintf("draining until %s (%s)", s.DrainingUntil.UTC().Format(time.RFC3339), left)
	}
	return dash(s.State)
}

// healthColumns are the backends table's health, last success and last
// error columns: up or down, ages like kubectl's, "-" for unknown.
func healthColumns(h *statuspublisher.Health, now time.Time) (health, ok, failed string) {
	if h == nil {
		return "-", "-", "-"
	}
	health, ok, failed = "down", "-", "-"
	if h.Up {
		health = "up"
	}
	if h.LastSuccess != nil {
		ok = age(now, h.LastSuccess.Time) + " ago"
	}
	if e := h.LastError; e != nil {
		failed = fmt.Sprintf("%s ago, %s (%s): %s", age(now, e.Time.Time), e.Operation, e.Class, e.Message)
	}
	return health, ok, failed
}

// age is how long before now t was, as kubectl shows ages.
func age(now, t time.Time) string { return duration.HumanDuration(now.Sub(t)) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

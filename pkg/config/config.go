// Package config reads the multicloud-ccm cloud-config file: one YAML document
// that names the cluster, says how Services and Nodes are routed, and lists the
// backends. Parse decodes strictly (an unknown or misspelt key is an error that
// names its path), applies defaults and validates, reporting every problem at
// once. The package names no backend type: it keeps each backend's name and
// type and hands the rest of the entry to the SectionParser the type
// registered, through backends.Register, from the backend's own package.
package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

const (
	// APIVersion is the only apiVersion this release reads.
	APIVersion = "multicloud-ccm.io/v1alpha1"
	// Kind is the only kind this release reads.
	Kind = "CloudConfig"
)

// UnmanagedPolicy says what the router does with a node whose providerID
// scheme no backend owns.
type UnmanagedPolicy string

const (
	// UnmanagedError reports such nodes as errors (and Warning events); they
	// are never deleted, shutdown-tainted or changed.
	UnmanagedError UnmanagedPolicy = "error"
	// UnmanagedIgnore leaves such nodes alone without reporting anything.
	UnmanagedIgnore UnmanagedPolicy = "ignore"
)

// CloudConfig is the whole cloud-config file.
type CloudConfig struct {
	// APIVersion must be multicloud-ccm.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind must be CloudConfig.
	Kind string `json:"kind"`
	// ClusterID names and tags everything multicloud-ccm creates. Required.
	ClusterID string `json:"clusterID"`
	// LoadBalancer holds settings for Services of type LoadBalancer.
	LoadBalancer LoadBalancer `json:"loadBalancer"`
	// Nodes holds settings for Node routing.
	Nodes Nodes `json:"nodes"`
	// Backends lists the clouds behind the router. At least one is required.
	Backends []Backend `json:"backends"`
}

// LoadBalancer holds settings for Services of type LoadBalancer.
type LoadBalancer struct {
	// DefaultBackend serves Services without the
	// multicloud-ccm.io/load-balancer-backend annotation. Empty: such
	// Services are left to whatever else implements load balancers.
	DefaultBackend string `json:"defaultBackend,omitempty"`
	// Classes map spec.loadBalancerClass values to the backends serving
	// them (see classes.go).
	Classes []LoadBalancerClass `json:"classes,omitempty"`
	// DrainPeriod is how long a load balancer a Service stops using (a
	// backend removed from its list, or its single backend changed) keeps
	// serving after its addresses left the Service's status, before it is
	// deleted; a Service's multicloud-ccm.io/load-balancer-drain annotation
	// overrides it. Unset or 0: deleted at once.
	DrainPeriod *metav1.Duration `json:"drainPeriod,omitempty"`
	// TargetOtherCCMsNodes hands load balancers the nodes of other CCMs
	// too (KEP-5778: nodes of a platform this CCM does not serve, see
	// nodes.platforms). Unset or false: a load balancer targets only the
	// nodes of the platforms served here, as the KEP's non-goals say.
	TargetOtherCCMsNodes bool `json:"targetOtherCCMsNodes,omitempty"`
}

// Drain returns loadBalancer.drainPeriod, 0 when unset.
func (l *LoadBalancer) Drain() time.Duration {
	if l.DrainPeriod == nil {
		return 0
	}
	return l.DrainPeriod.Duration
}

// Nodes holds settings for Node routing.
type Nodes struct {
	// Unmanaged is error (default) or ignore.
	Unmanaged UnmanagedPolicy `json:"unmanaged,omitempty"`
	// Rules choose the backend of a node that has no providerID yet and no
	// multicloud-ccm.io/backend label. The first matching rule wins.
	Rules []NodeRule `json:"rules,omitempty"`
	// Platforms, when set, are the only platforms (KEP-5778 platform
	// identifiers: providerID schemes such as aws or vsphere) whose nodes
	// this CCM serves, even where a backend exists for another: the nodes
	// of every other platform belong to another CCM and are left alone.
	// Unset: every platform a backend (or a Schemes entry) serves. See
	// platforms.go.
	Platforms []string `json:"platforms,omitempty"`
	// Schemes are providerID schemes written by other tools (Cluster API's
	// Metal3 writes metal3://) whose nodes a backend serves, matched to its
	// machines by node name.
	Schemes []SchemeAlias `json:"schemes,omitempty"`
}

// NodeRule matches nodes by name and/or labels. A rule with both matches a
// node only when both match.
type NodeRule struct {
	// Backend is the name of the backend that owns matching nodes.
	Backend string `json:"backend"`
	// NodeNameRegex is an RE2 expression matched against the node name.
	NodeNameRegex string `json:"nodeNameRegex,omitempty"`
	// MatchLabels must all be present on the node with these values.
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	nameRE *regexp.Regexp
}

// NewNodeRule returns a compiled rule, as Parse would produce it.
func NewNodeRule(backend, nodeNameRegex string, matchLabels map[string]string) (NodeRule, error) {
	r := NodeRule{Backend: backend, NodeNameRegex: nodeNameRegex, MatchLabels: matchLabels}
	if nodeNameRegex == "" {
		return r, nil
	}
	re, err := regexp.Compile(nodeNameRegex)
	r.nameRE = re
	return r, err
}

// Matches reports whether the rule matches a node with this name and labels.
func (r *NodeRule) Matches(name string, labels map[string]string) bool {
	if r.nameRE != nil && !r.nameRE.MatchString(name) {
		return false
	}
	for k, v := range r.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Backend is one entry of the backends list: a name, a type, and exactly one
// settings section, the one keyed by the type. The config file format names
// no backend type: every other key is handed, raw, to the SectionParser its
// type registered (see RegisterSection).
type Backend struct {
	// Name is unique, a DNS label; Services name it in the
	// multicloud-ccm.io/load-balancer-backend annotation.
	Name string `json:"name"`
	// Type is one of the registered backend types (RegisteredTypes).
	Type string `json:"type"`

	// Sections holds the entry's other keys as written (JSON), by key; the
	// one named after Type is the backend's settings. Nil when there are
	// none.
	Sections map[string]json.RawMessage `json:"-"`

	// Settings is what the type's SectionParser returned. Set by Parse.
	Settings any `json:"-"`

	// sectionOK is set by Parse when the section parsed without error.
	sectionOK bool
}

// MarshalJSON writes the entry as the config file has it: name, type and
// the sections inline.
func (b Backend) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(b.Sections)+2)
	for k, v := range b.Sections {
		m[k] = v
	}
	m["name"], m["type"] = b.Name, b.Type
	return json.Marshal(m)
}

// UnmarshalJSON reads an entry leniently: name and type, and every other key
// into Sections. Parse decodes strictly and reports what does not belong.
func (b *Backend) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	var head backendHead
	if err := json.Unmarshal(data, &head); err != nil {
		return err
	}
	delete(m, "name")
	delete(m, "type")
	if len(m) == 0 {
		m = nil
	}
	*b = Backend{Name: head.Name, Type: head.Type, Sections: m}
	return nil
}

// backendHead is the part of a backend entry config decodes itself.
type backendHead struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// SectionParser decodes and validates one backend type's section. raw is the
// section as JSON (nil when absent); path names it for error messages; dir
// is the folder of the config file, against which relative file paths in the
// section resolve. It returns the settings the backend's constructor reads.
type SectionParser func(raw []byte, path *field.Path, dir string) (any, field.ErrorList)

var (
	sectionsMu sync.RWMutex
	parsers    = map[string]SectionParser{}
)

// RegisterSection makes a backend type known to the config parser. A backend
// package does not call it: backends.Register does, with the rest of the
// type's registration. It panics when the type is registered twice, as that
// is a programming error.
func RegisterSection(typ string, p SectionParser) {
	sectionsMu.Lock()
	defer sectionsMu.Unlock()
	if _, dup := parsers[typ]; dup {
		panic(fmt.Sprintf("config: section parser for backend type %q registered twice", typ))
	}
	parsers[typ] = p
}

func sectionParser(typ string) (SectionParser, bool) {
	sectionsMu.RLock()
	defer sectionsMu.RUnlock()
	p, ok := parsers[typ]
	return p, ok
}

// RegisteredTypes lists the backend types this binary knows, sorted.
func RegisteredTypes() []string {
	sectionsMu.RLock()
	defer sectionsMu.RUnlock()
	types := make([]string, 0, len(parsers))
	for t := range parsers {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}

// Load reads and parses the config file at path. Problems of the file as a
// whole (not YAML) name the path.
func Load(path string) (*CloudConfig, error) {
	data, err := os.ReadFile(path) //nolint:gosec // G304: the operator's --cloud-config path.
	if err != nil {
		return nil, fmt.Errorf("reading cloud-config: %w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("reading cloud-config: %w", err)
	}
	return parse(data, dir, path)
}

// Parse decodes, defaults and validates a config document. dir is where
// relative file paths resolve. The error, if any, joins every problem found,
// each naming its field path.
func Parse(data []byte, dir string) (*CloudConfig, error) {
	return parse(data, dir, "cloud-config")
}

// FileError is a problem of the file as a whole: it is not YAML, or it
// repeats a key (YAML names the line, not the path).
type FileError struct {
	// File is the file's path as given, or "cloud-config".
	File string
	// Problem says what is wrong, with the line where YAML gives one.
	Problem string
}

func (e *FileError) Error() string { return e.File + ": " + e.Problem }

func parse(data []byte, dir, name string) (*CloudConfig, error) {
	cfg, fileErr, errs := decode(data, name)
	if cfg == nil {
		return nil, fileErr
	}
	cfg.setDefaults()
	errs = prune(append(errs, cfg.validate(dir)...))
	if fileErr == nil && len(errs) == 0 {
		return cfg, nil
	}
	all := make([]error, 0, len(errs)+1)
	if fileErr != nil {
		all = append(all, fileErr)
	}
	for _, e := range errs {
		all = append(all, e)
	}
	return nil, utilerrors.NewAggregate(all)
}

// decode turns YAML into the typed config. A nil config means the document
// could not be read at all (fileErr says why). A repeated key is a fileErr
// too, but the rest of the document is still decoded (the last value wins)
// and checked; errs holds values of the wrong type and unknown keys.
func decode(data []byte, name string) (cfg *CloudConfig, fileErr *FileError, errs field.ErrorList) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, &FileError{File: name, Problem: "the file is empty; it needs at least apiVersion, kind, clusterID and backends"}, nil
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		js, fileErr = yamlFallback(data, name, err)
		if js == nil {
			return nil, fileErr, nil
		}
	}
	// The document is decoded strictly with each backend cut down to its
	// name and type; the other keys of an entry are its sections, which
	// validation hands to the registered parsers.
	doc := &document{}
	errs, cleaned := decodeClean(js, nil, doc)
	errs = slices.DeleteFunc(errs, isSectionKey)
	var entries struct {
		Backends []Backend `json:"backends"`
	}
	// Values of the wrong type are reported above; what is left decodes.
	_ = json.Unmarshal(cleaned, &entries)
	cfg = &doc.CloudConfig
	cfg.Backends = entries.Backends
	return cfg, fileErr, errs
}

// yamlFallback handles a document the strict YAML reader refused: one that
// only repeats a key is read leniently, the repetition reported; anything
// else is not YAML (nil JSON).
func yamlFallback(data []byte, name string, strictErr error) ([]byte, *FileError) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, &FileError{File: name, Problem: "not valid YAML: " + yamlMessage(err)}
	}
	return js, &FileError{File: name, Problem: yamlMessage(strictErr) + ": keep one"}
}

// yamlMessage strips the converter's prefixes from a YAML error.
func yamlMessage(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	return strings.Join(strings.Fields(msg), " ")
}

// document is the file as the strict decoder sees it.
type document struct {
	CloudConfig
	Backends []backendHead `json:"backends"`
}

// sectionKeyRE matches the path of a key of a backend entry other than name
// and type: such keys are sections, checked by their parsers.
var sectionKeyRE = regexp.MustCompile(`^backends\[\d+\]\.[^.\[]+$`)

func isSectionKey(e *field.Error) bool {
	return e.Type == field.ErrorTypeForbidden && sectionKeyRE.MatchString(e.Field)
}

// unknownField is the error for a key no one reads, with the closest of
// the keys that are read when it looks misspelt.
func unknownField(p *field.Path, known []string) *field.Error {
	return decodeErr(field.Forbidden(p, "unknown field: remove it or fix its spelling"+suggest(lastKey(p), known)))
}

// lastKey is the last key of a path ending in a key.
func lastKey(p *field.Path) string {
	s := p.String()
	return s[strings.LastIndexAny(s, ".]")+1:]
}

// DecodeSection decodes a backend section into v, strictly and completely:
// every value of the wrong type and every unknown or repeated key comes back
// as an error under path, and everything else is decoded into v. A section
// parser validates v even when there were errors: Parse drops what
// validation says about a value that was of the wrong type.
func DecodeSection(raw []byte, path *field.Path, v any) field.ErrorList {
	if len(raw) == 0 {
		return field.ErrorList{decodeErr(field.Required(path, "the backend's settings are missing"))}
	}
	return decodeInto(raw, path, v)
}

func (c *CloudConfig) setDefaults() {
	if c.Nodes.Unmanaged == "" {
		c.Nodes.Unmanaged = UnmanagedError
	}
}

func (c *CloudConfig) validate(dir string) field.ErrorList {
	var errs field.ErrorList
	if c.APIVersion != APIVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), c.APIVersion, "must be "+APIVersion))
	}
	if c.Kind != Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), c.Kind, "must be "+Kind))
	}
	errs = append(errs, validateClusterID(c.ClusterID)...)
	names := map[string]*Backend{}
	errs = append(errs, c.validateBackends(dir, names)...)
	errs = append(errs, c.validateAcross()...)
	errs = append(errs, c.validateLoadBalancer(names)...)
	errs = append(errs, c.validateClasses(names)...)
	errs = append(errs, c.ValidateLoadBalancerBackends(nil, nil)...)
	errs = append(errs, c.validateNodes(names)...)
	return errs
}

func validateClusterID(id string) field.ErrorList {
	p := field.NewPath("clusterID")
	if id == "" {
		return field.ErrorList{field.Required(p, "set clusterID to a short name for this cluster, e.g. prod-eu-1; it names and tags the cloud resources created for it")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(id) {
		errs = append(errs, field.Invalid(p, id, msg))
	}
	return errs
}

func (c *CloudConfig) validateBackends(dir string, names map[string]*Backend) field.ErrorList {
	p := field.NewPath("backends")
	if len(c.Backends) == 0 {
		return field.ErrorList{field.Required(p, "list at least one backend")}
	}
	var errs field.ErrorList
	for i := range c.Backends {
		b := &c.Backends[i]
		bp := p.Index(i)
		for _, msg := range validation.IsDNS1123Label(b.Name) {
			errs = append(errs, field.Invalid(bp.Child("name"), b.Name, msg))
		}
		if _, dup := names[b.Name]; dup && b.Name != "" {
			errs = append(errs, field.Duplicate(bp.Child("name"), b.Name))
		}
		names[b.Name] = b
		errs = append(errs, b.parseSection(bp, dir)...)
	}
	return errs
}

// parseSection checks that exactly the section named by Type is present and
// hands it to the type's parser. A key of an entry of unknown type is
// reported as unknown unless it is a registered type.
func (b *Backend) parseSection(bp *field.Path, dir string) field.ErrorList {
	parse, ok := sectionParser(b.Type)
	var errs field.ErrorList
	for _, key := range slices.Sorted(maps.Keys(b.Sections)) {
		switch _, known := sectionParser(key); {
		case ok && key != b.Type:
			errs = append(errs, field.Forbidden(bp.Child(key), fmt.Sprintf("a backend of type %q takes its settings under %q; remove %q", b.Type, b.Type, key)))
		case !ok && !known && key != b.Type:
			errs = append(errs, unknownField(bp.Child(key), append([]string{"name", "type"}, RegisteredTypes()...)))
		}
	}
	switch {
	case b.Type == "":
		return append(errs, field.Required(bp.Child("type"), "set type to one of: "+strings.Join(RegisteredTypes(), ", ")))
	case !ok:
		return append(errs, field.NotSupported(bp.Child("type"), b.Type, RegisteredTypes()))
	}
	settings, serrs := parse(b.Sections[b.Type], bp.Child(b.Type), dir)
	b.Settings, b.sectionOK = settings, len(serrs) == 0
	return append(errs, serrs...)
}

func (c *CloudConfig) validateLoadBalancer(names map[string]*Backend) field.ErrorList {
	if d := c.LoadBalancer.DrainPeriod; d != nil && d.Duration < 0 {
		return field.ErrorList{field.Invalid(field.NewPath("loadBalancer", "drainPeriod"), d.Duration.String(), "must be 0 (delete at once) or a positive duration such as 5m")}
	}
	if c.LoadBalancer.DefaultBackend == "" {
		return nil
	}
	if _, ok := names[c.LoadBalancer.DefaultBackend]; !ok {
		return field.ErrorList{field.NotSupported(field.NewPath("loadBalancer", "defaultBackend"), c.LoadBalancer.DefaultBackend, backendNames(names))}
	}
	return nil
}

func (c *CloudConfig) validateNodes(names map[string]*Backend) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("nodes")
	switch c.Nodes.Unmanaged {
	case UnmanagedError, UnmanagedIgnore:
	default:
		errs = append(errs, field.NotSupported(p.Child("unmanaged"), c.Nodes.Unmanaged, []UnmanagedPolicy{UnmanagedError, UnmanagedIgnore}))
	}
	for i := range c.Nodes.Rules {
		errs = append(errs, c.Nodes.Rules[i].validate(p.Child("rules").Index(i), names)...)
	}
	errs = append(errs, validatePlatformList(p.Child("platforms"), c.Nodes.Platforms)...)
	errs = append(errs, c.validateSchemes(names)...)
	errs = append(errs, c.validatePlatforms()...)
	return errs
}

func (r *NodeRule) validate(p *field.Path, names map[string]*Backend) field.ErrorList {
	var errs field.ErrorList
	if _, ok := names[r.Backend]; !ok {
		errs = append(errs, field.NotSupported(p.Child("backend"), r.Backend, backendNames(names)))
	}
	if r.NodeNameRegex == "" && len(r.MatchLabels) == 0 {
		errs = append(errs, field.Required(p, "a rule needs nodeNameRegex, matchLabels or both"))
	}
	if r.NodeNameRegex != "" {
		re, err := regexp.Compile(r.NodeNameRegex)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("nodeNameRegex"), r.NodeNameRegex, "not an RE2 regular expression: "+err.Error()))
		}
		r.nameRE = re
	}
	if len(r.MatchLabels) > 0 {
		sel := &metav1.LabelSelector{MatchLabels: r.MatchLabels}
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			errs = append(errs, field.Invalid(p.Child("matchLabels"), r.MatchLabels, err.Error()))
		}
	}
	return errs
}

func backendNames(names map[string]*Backend) []string {
	out := make([]string, 0, len(names))
	for n := range names {
		if n != "" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

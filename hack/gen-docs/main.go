// Command gen-docs writes docs/annotations.md, the annotation and label
// reference, from the doc comments of the exported annotation and label name
// constants: those of package annotation (shared by every backend) and those
// in each backend's annotations.go, with each value's kind from the
// annotation registry (annotation.Registry). From the same registry it
// writes the chart's admission policy CEL (pkg/admission) under
// charts/multicloud-ccm/files/admission. Run it from the module root:
//
//	go run ./hack/gen-docs
//
// Its test fails when the committed reference or policy is stale.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/admission"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// output is the generated reference, relative to the module root.
const output = "docs/annotations.md"

// chartDir is the chart the admission policy files go to.
const chartDir = "charts/multicloud-ccm"

func main() {
	files, err := outputs(".")
	if err == nil {
		for path, b := range files {
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // a source folder.
				break
			}
			if err = os.WriteFile(path, b, 0o644); err != nil { //nolint:gosec // documentation and chart files, world-readable on purpose.
				break
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-docs:", err)
		os.Exit(1)
	}
}

// outputs are every generated file by path relative to root: the reference
// and the chart's policy files.
func outputs(root string) (map[string][]byte, error) {
	doc, err := generate(root)
	if err != nil {
		return nil, err
	}
	policy, err := admission.Files()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{filepath.Join(root, output): doc}
	for name, b := range policy {
		out[filepath.Join(root, chartDir, name)] = b
	}
	return out, nil
}

// entry is one documented annotation or label name.
type entry struct {
	goName string // e.g. annotation.LoadBalancerBackend
	value  string // e.g. multicloud-ccm.io/load-balancer-backend
	doc    string // the doc comment, as written
}

// source is one file of name constants and how its section is titled.
type source struct {
	title string
	intro string
	pkg   string
	file  string
}

// sources lists the files read: package annotation first, then every
// backend's annotations.go, sorted by backend.
func sources(root string) ([]source, error) {
	out := []source{{
		title: "Shared by every backend (package `annotation`)",
		intro: "Read by the router and by every backend that offers what they configure.",
		pkg:   "annotation",
		file:  "pkg/annotation/annotation.go",
	}}
	files, err := filepath.Glob(filepath.Join(root, "pkg/backends/*/annotations.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f))
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return nil, err
		}
		intro := fmt.Sprintf("Read only by backends of `type: %s`.", name)
		if _, err := os.Stat(filepath.Join(root, "docs", name+".md")); err == nil {
			intro += fmt.Sprintf(" More in [%s.md](%s.md).", name, name)
		}
		out = append(out, source{title: fmt.Sprintf("Backend type `%s` (package `%s`)", name, name), intro: intro, pkg: name, file: filepath.ToSlash(rel)})
	}
	return out, nil
}

// entries returns the exported string constants of a file whose value is an
// annotation or label name (it holds a "/"), with their doc comments.
func entries(root string, s source) ([]entry, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, s.file), nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var out []entry
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			out = append(out, specEntries(s.pkg, gd, spec.(*ast.ValueSpec))...)
		}
	}
	for _, e := range out {
		if e.doc == "" {
			return nil, fmt.Errorf("%s: %s has no doc comment; write one giving its type, default and meaning", s.file, e.goName)
		}
	}
	return out, nil
}

func specEntries(pkg string, gd *ast.GenDecl, vs *ast.ValueSpec) []entry {
	var out []entry
	for i, name := range vs.Names {
		if !name.IsExported() || i >= len(vs.Values) {
			continue
		}
		lit, ok := vs.Values[i].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			continue
		}
		value, err := strconv.Unquote(lit.Value)
		if err != nil || !strings.Contains(value, "/") {
			continue
		}
		doc := vs.Doc.Text()
		if doc == "" && len(gd.Specs) == 1 {
			doc = gd.Doc.Text()
		}
		out = append(out, entry{goName: pkg + "." + name.Name, value: value, doc: strings.TrimSpace(doc)})
	}
	return out
}

// describe turns a Go doc comment into reference prose: the leading
// constant name goes, the rest is joined into paragraphs.
func describe(e entry) string {
	short := e.goName[strings.LastIndexByte(e.goName, '.')+1:]
	text := strings.TrimPrefix(e.doc, short+" ")
	paras := strings.Split(text, "\n\n")
	for i, p := range paras {
		paras[i] = strings.Join(strings.Fields(p), " ")
	}
	out := strings.Join(paras, "\n\n")
	if out != "" && out[0] == '(' {
		// "(Service annotation, string, default: x) names ..." reads as a
		// sentence once its type note stands on its own.
		if end := strings.IndexByte(out, ')'); end > 0 {
			rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out[end+1:]), "."))
			out = "*" + out[1:end] + ".* " + upperFirst(rest)
		}
	}
	return out
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

const preamble = `<!-- Generated by "go run ./hack/gen-docs" from the doc comments of the
     annotation and label constants; edit those, not this file. -->

# Annotations and labels

Every Service annotation and Node label multicloud-ccm reads or writes.
Each is a constant in the code with a doc comment giving its type and
default; this page is generated from those comments, and a test fails when
it is out of date. The names are part of the user-facing API and never change.

Labels multicloud-ccm sets on a Node when it initialises it, besides those
below: the standard ` + "`topology.kubernetes.io/zone`, `topology.kubernetes.io/region` and `node.kubernetes.io/instance-type`" + `
(written by the upstream node controller from the backend's answer), and any
labels the backend reports for the machine (for example a bare-metal
inventory entry's ` + "`labels`" + `). How the router uses the shared names is in
[routing.md](routing.md); the config file is in
[configuration.md](configuration.md).
`

// generate renders the whole reference.
func generate(root string) ([]byte, error) {
	srcs, err := sources(root)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(preamble)
	seen := map[string]bool{}
	for _, s := range srcs {
		es, err := entries(root, s)
		if err != nil {
			return nil, err
		}
		if len(es) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n", s.title, s.intro)
		for _, e := range es {
			seen[e.value] = true
			fmt.Fprintf(&b, "\n### `%s`\n\n%s\n%s\nGo: `%s` in [%s](../%s).\n", e.value, describe(e), admissionText(e.value), e.goName, s.file, s.file)
		}
	}
	fmt.Fprintf(&b, "\n## Other controllers' annotations\n\n%s\n", othersIntro)
	for _, s := range annotation.Registry {
		if !seen[string(s.Name)] {
			fmt.Fprintf(&b, "\n### `%s`\n\nRead by the `%s` backend.\n%s", s.Name, strings.Join(s.Readers(), "` and `"), admissionText(string(s.Name)))
		}
	}
	return b.Bytes(), nil
}

const othersIntro = `Annotations of MetalLB and kube-vip: the bare-metal backend keeps the
addresses they request out of its own allocation (and, with ` + "`announce: kube-vip`" + `,
writes or reads kube-vip's). The admission policy checks their form.`

// admissionText is the registry's word on an annotation: its value and,
// when a change replaces something, the warning; "" for a name the
// registry does not hold.
func admissionText(name string) string {
	s, ok := annotation.Lookup(annotation.Name(name))
	if !ok {
		return ""
	}
	text := "\nValue: " + s.Describe()
	if s.Kind != annotation.KindUnchecked {
		text += " Checked when a Service is created or changed ([chart.md](chart.md#annotations-checked-at-admission))."
	}
	if s.Replaces != "" {
		text += " Changing it on a LoadBalancer Service warns: it " + s.Replaces + "."
	}
	return text + "\n"
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

const root = "../.."

// TestReferenceIsCurrent fails when docs/annotations.md or the chart's
// admission policy files differ from what the constants' doc comments and
// the annotation registry generate.
func TestReferenceIsCurrent(t *testing.T) {
	files, err := outputs(root)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `go run ./hack/gen-docs` from the module root and commit the result", path)
		}
	}
}

// TestEveryServiceAnnotationRegistered: every Service annotation constant
// has a registry entry, so the admission policy and the reference cover
// it; a new constant without one fails here.
func TestEveryServiceAnnotationRegistered(t *testing.T) {
	srcs, err := sources(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range srcs {
		es, err := entries(root, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if strings.Contains(e.doc, "Node label") {
				continue
			}
			if _, ok := annotation.Lookup(annotation.Name(e.value)); !ok {
				t.Errorf("%s (%s) is not in annotation.Registry: add it with its value's kind", e.goName, e.value)
			}
		}
	}
}

// TestSharedNamesDocumented: every shared name says what it annotates, its
// type and its default, and all of them reach the reference.
func TestSharedNamesDocumented(t *testing.T) {
	srcs, err := sources(root)
	if err != nil {
		t.Fatal(err)
	}
	es, err := entries(root, srcs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"multicloud-ccm.io/load-balancer-backend": false, "multicloud-ccm.io/backend": false,
		"multicloud-ccm.io/load-balancer-ips": false, "multicloud-ccm.io/allow-shared-ip": false,
	}
	for _, e := range es {
		want[e.value] = true
		d := describe(e)
		if !strings.HasPrefix(d, "*Service annotation,") && !strings.HasPrefix(d, "*Node label,") {
			t.Errorf("%s: doc must open with (Service annotation, ...) or (Node label, ...): %q", e.goName, e.doc)
		}
		if !strings.Contains(d, "default") {
			t.Errorf("%s: doc does not give the default: %q", e.goName, e.doc)
		}
	}
	for v, seen := range want {
		if !seen {
			t.Errorf("%s is not documented from package annotation", v)
		}
	}
}

func TestEntriesRefuseUndocumented(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n\nconst X = \"example.com/x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := entries(dir, source{pkg: "a", file: "a.go"})
	if err == nil || !strings.Contains(err.Error(), "a.X has no doc comment") {
		t.Errorf("err = %v", err)
	}
}

func TestDescribe(t *testing.T) {
	e := entry{goName: "annotation.Foo", doc: "Foo (Service annotation, string, default: none) names\nthe thing.\n\nSecond paragraph."}
	want := "*Service annotation, string, default: none.* Names the thing.\n\nSecond paragraph."
	if got := describe(e); got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
	e = entry{goName: "annotation.Bar", doc: "Bar (Node label, string, default: none). Set by hand."}
	if got, want := describe(e), "*Node label, string, default: none.* Set by hand."; got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
}

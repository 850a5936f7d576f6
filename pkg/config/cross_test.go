package config_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// crossType is a backend type of this test only: its sections carry no
// settings, and its cross-section check records what it was called with and
// refuses any two backends whose names share their first letter.
const crossType = "crosstest"

var crossCalls [][]config.Section

func init() {
	config.RegisterSection(crossType, func(_ []byte, path *field.Path, _ string) (any, field.ErrorList) {
		return path.String(), nil
	})
	config.RegisterCrossValidator(crossType, func(sections []config.Section) field.ErrorList {
		crossCalls = append(crossCalls, sections)
		var errs field.ErrorList
		for i, a := range sections {
			for _, b := range sections[i+1:] {
				if a.Backend[0] == b.Backend[0] {
					errs = append(errs, field.Invalid(b.Path, b.Backend, fmt.Sprintf("clashes with %s", a.Path)))
				}
			}
		}
		return errs
	})
}

func TestCrossValidator(t *testing.T) {
	doc := header + `backends:
- {name: alpha, type: crosstest}
- {name: beta, type: crosstest}
- {name: apple, type: crosstest}
` + metal
	crossCalls = nil
	_, err := config.Parse([]byte(doc), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "backends[2].crosstest: Invalid value: \"apple\": clashes with backends[0].crosstest") {
		t.Fatalf("Parse = %v; want the clash naming both paths", err)
	}
	if len(crossCalls) != 1 || len(crossCalls[0]) != 3 {
		t.Fatalf("validator calls = %+v; want one call with the 3 crosstest sections", crossCalls)
	}
	for i, s := range crossCalls[0] {
		if want := fmt.Sprintf("backends[%d].crosstest", i); s.Path.String() != want || s.Settings != want {
			t.Errorf("section %d = %s %v, want path and settings %s", i, s.Path, s.Settings, want)
		}
	}

	crossCalls = nil
	mustParse(t, header+"backends:\n- {name: alpha, type: crosstest}\n"+metal)
	if len(crossCalls) != 0 {
		t.Errorf("validator called for a single section: %+v", crossCalls)
	}
}

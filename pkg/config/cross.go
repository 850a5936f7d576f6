package config

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Section is one backend's parsed section, as a CrossValidator sees it.
type Section struct {
	// Backend is the backend's name.
	Backend string
	// Path names the section, backends[i].<type>, for error messages.
	Path *field.Path
	// Settings is what the type's SectionParser returned.
	Settings any
}

// CrossValidator checks the sections of one backend type together, for
// rules no section can check alone (two backends handing out the same
// address). Parse calls it once with every section of its type that parsed
// without error, in config order, and only when there are at least two.
// Each error names the field paths concerned.
type CrossValidator func(sections []Section) field.ErrorList

var crossValidators = map[string]CrossValidator{}

// RegisterCrossValidator adds the cross-section check of a backend type;
// backends.Register calls it for a Registration with CrossValidate. It
// panics when the type already has one, as that is a programming error.
func RegisterCrossValidator(typ string, v CrossValidator) {
	sectionsMu.Lock()
	defer sectionsMu.Unlock()
	if _, dup := crossValidators[typ]; dup {
		panic(fmt.Sprintf("config: cross-section validator for backend type %q registered twice", typ))
	}
	crossValidators[typ] = v
}

// validateAcross runs each type's CrossValidator over its sections.
func (c *CloudConfig) validateAcross() field.ErrorList {
	byType := map[string][]Section{}
	p := field.NewPath("backends")
	for i := range c.Backends {
		b := &c.Backends[i]
		if b.sectionOK {
			byType[b.Type] = append(byType[b.Type], Section{Backend: b.Name, Path: p.Index(i).Child(b.Type), Settings: b.Settings})
		}
	}
	types := make([]string, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	sort.Strings(types)
	var errs field.ErrorList
	for _, t := range types {
		sectionsMu.RLock()
		v := crossValidators[t]
		sectionsMu.RUnlock()
		if v != nil && len(byType[t]) > 1 {
			errs = append(errs, v(byType[t])...)
		}
	}
	return errs
}

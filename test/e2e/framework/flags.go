package framework

import "strings"

// mergeFlags returns defaults followed by extra, minus every default whose
// flag name (the part before "=") also appears in extra, so callers can
// override any flag the framework sets.
func mergeFlags(defaults, extra []string) []string {
	overridden := map[string]bool{}
	for _, f := range extra {
		overridden[flagName(f)] = true
	}
	out := make([]string, 0, len(defaults)+len(extra))
	for _, f := range defaults {
		if !overridden[flagName(f)] {
			out = append(out, f)
		}
	}
	return append(out, extra...)
}

func flagName(f string) string {
	name, _, _ := strings.Cut(f, "=")
	return name
}

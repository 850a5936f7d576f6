package backend

import (
	"fmt"
	"sort"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Names returns the backends' names, sorted.
func Names(bs []*Member) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Name)
	}
	sort.Strings(out)
	return out
}

// UserErr is a node- or Service-routing failure a user can fix, with the
// event reason to record on the object.
func UserErr(reason, format string, args ...any) error {
	return backends.NewUserError(reason, fmt.Errorf(format, args...))
}

package bmconfig

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/addrpool"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// poolEntryRef is one pool entry of one backend, for the cross-backend
// overlap check.
type poolEntryRef struct {
	r       addrpool.Range
	backend string
	path    *field.Path
}

// CheckPoolsAcross is the config.CrossValidator of the baremetal type: no
// address may lie in the pools of two backends, or both would hand it out.
// Each overlap is reported once, at the later entry, naming both paths.
func CheckPoolsAcross(sections []config.Section) field.ErrorList {
	var seen []poolEntryRef
	var errs field.ErrorList
	for _, sec := range sections {
		s, ok := sec.Settings.(*Settings)
		if !ok || s.compiled == nil {
			continue
		}
		var mine []poolEntryRef
		for pi, pl := range s.compiled.Pools {
			for ei, e := range pl.Entries {
				ref := poolEntryRef{r: e.Extent, backend: sec.Backend, path: sec.Path.Child("addressPools").Index(pi).Child("addresses").Index(ei)}
				errs = append(errs, overlapsWith(ref, seen)...)
				mine = append(mine, ref)
			}
		}
		seen = append(seen, mine...)
	}
	return errs
}

// overlapsWith reports ref's overlaps with the entries of earlier backends.
func overlapsWith(ref poolEntryRef, earlier []poolEntryRef) field.ErrorList {
	var errs field.ErrorList
	for _, o := range earlier {
		if o.r.Contains(ref.r.First) || ref.r.Contains(o.r.First) {
			errs = append(errs, field.Invalid(ref.path, ref.r.String(), fmt.Sprintf(
				"overlaps %s of backend %q (%s): two baremetal backends would hand out the same addresses; give each backend its own addresses",
				o.r, o.backend, o.path)))
		}
	}
	return errs
}

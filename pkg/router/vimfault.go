package router

import (
	"reflect"
	"slices"
	"strings"
)

// vSphere faults (the vSphere Web Services API reference's fault types) by
// class: a session that expired or was never opened, refused credentials
// and a missing privilege are auth; a managed object that is gone (a VM
// deleted between the inventory and the call) is not_found.
var (
	vimAuthFaults     = []string{"NotAuthenticated", "InvalidLogin", "NoPermission"}
	vimNotFoundFaults = []string{"ManagedObjectNotFound"}
)

// govmomiPrefix is the import path of every govmomi package: only its
// errors' Fault methods are asked.
const govmomiPrefix = "github.com/vmware/govmomi/"

// classOfFault is the class of the vSphere fault named name, if it has one.
func classOfFault(name string) (errorClass, bool) {
	switch {
	case slices.Contains(vimAuthFaults, name):
		return classAuth, true
	case slices.Contains(vimNotFoundFaults, name):
		return classNotFound, true
	}
	return classOther, false
}

// vimFaultName returns the type name of the first vSphere fault in err's
// chain (NotAuthenticated, ManagedObjectNotFound, ...), or "". govmomi's
// errors (soap's SOAP and VIM fault errors, task.Error) have a method
// Fault() types.BaseMethodFault; without importing govmomi the router
// calls it by reflection, on govmomi's types only.
func vimFaultName(err error) string {
	for _, e := range chain(err) {
		if name := faultOf(e); name != "" {
			return name
		}
	}
	return ""
}

// chain lists err and every error it wraps, depth first.
func chain(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		for e != nil {
			out = append(out, e)
			switch u := e.(type) { //nolint:errorlint // walking the chain by hand.
			case interface{ Unwrap() []error }:
				for _, inner := range u.Unwrap() {
					walk(inner)
				}
				return
			case interface{ Unwrap() error }:
				e = u.Unwrap()
			default:
				return
			}
		}
	}
	walk(err)
	return out
}

// faultOf returns the type name of the fault e's Fault method returns, when
// e is a govmomi error.
func faultOf(e error) (name string) {
	v := reflect.ValueOf(e)
	if !strings.HasPrefix(indirect(v.Type()).PkgPath(), govmomiPrefix) {
		return ""
	}
	m := v.MethodByName("Fault")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 || m.Type().Out(0).Kind() != reflect.Interface {
		return ""
	}
	defer func() {
		if recover() != nil {
			name = "" // a task.Error without its fault
		}
	}()
	f := m.Call(nil)[0]
	if f.IsNil() {
		return ""
	}
	return indirect(f.Elem().Type()).Name()
}

// indirect is t, or what it points to.
func indirect(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

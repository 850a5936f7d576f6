package config

import (
	"reflect"
	"slices"
	"strings"
)

// ReferencedFiles lists the files a backend's settings read: the File of
// every SecretRef, and every non-empty string field whose name ends in
// "File" (CAFile, CloudsFile), found by walking the exported fields of the
// value a SectionParser returned. Paths are as Parse left them (absolute
// where the config's folder was known), sorted, without duplicates. A
// reloading process watches them beside the config file itself.
func ReferencedFiles(settings any) []string {
	var out []string
	walkFiles(reflect.ValueOf(settings), &out, 0)
	slices.Sort(out)
	return slices.Compact(out)
}

var secretRefType = reflect.TypeFor[SecretRef]()

// maxFileDepth bounds the walk; settings are shallow trees.
const maxFileDepth = 16

func walkFiles(v reflect.Value, out *[]string, depth int) {
	if !v.IsValid() || depth > maxFileDepth {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkFiles(v.Elem(), out, depth+1)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkFiles(v.Index(i), out, depth+1)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			walkFiles(it.Value(), out, depth+1)
		}
	case reflect.Struct:
		walkStruct(v, out, depth)
	}
}

func walkStruct(v reflect.Value, out *[]string, depth int) {
	if v.Type() == secretRefType {
		if f := v.Interface().(SecretRef).File; f != "" { //nolint:forcetypeassert // checked by type.
			*out = append(*out, f)
		}
		return
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.String && strings.HasSuffix(f.Name, "File") {
			if s := fv.String(); s != "" {
				*out = append(*out, s)
			}
			continue
		}
		walkFiles(fv, out, depth+1)
	}
}

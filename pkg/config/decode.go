package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
)

// originDecode marks the errors of decoding (a value of the wrong type, an
// unknown key). A value of the wrong type is left at its zero value, so
// validation's complaints about it, or about anything under it, are noise:
// Parse drops them (see prune).
const originDecode = "decode"

// decodeInto decodes the JSON document js into v (a pointer) strictly and
// completely: every value of the wrong type and every unknown key is
// reported under base, each once, and everything else is decoded, so that
// validation can report the rest of the document's problems in the same run.
//
// encoding/json stops reporting at the first type error and then drops the
// strict errors, so the document is first checked against v's type here,
// each value of the wrong type reported with its full path and removed;
// what is left is decoded by sigs.k8s.io/json, whose strict errors carry
// their field paths.
func decodeInto(js []byte, base *field.Path, v any) field.ErrorList {
	errs, _ := decodeClean(js, base, v)
	return errs
}

// decodeClean is decodeInto, also returning the document without the
// values of the wrong type (nil if it was not JSON).
func decodeClean(js []byte, base *field.Path, v any) (field.ErrorList, []byte) {
	var tree any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return field.ErrorList{decodeErr(field.Invalid(base, field.OmitValueType{}, "not valid JSON: "+err.Error()))}, nil
	}
	c := &checker{unknown: map[string][]string{}}
	tree, _ = c.check(tree, reflect.TypeOf(v).Elem(), base)
	// Maps are walked in no order; the report has one.
	slices.SortStableFunc(c.errs, func(a, b *field.Error) int { return strings.Compare(a.Field, b.Field) })
	cleaned, err := json.Marshal(tree)
	if err == nil {
		var strict []error
		strict, err = kjson.UnmarshalStrict(cleaned, v)
		c.errs = append(c.errs, c.strictErrors(base, strict)...)
	}
	if err != nil { // The checker let through a value the decoder refused.
		c.errs = append(c.errs, decodeErr(field.Invalid(base, field.OmitValueType{}, err.Error())))
	}
	return c.errs, cleaned
}

func decodeErr(e *field.Error) *field.Error {
	e.Origin = originDecode
	return e
}

// checker walks a decoded JSON tree beside the Go type it is meant for.
type checker struct {
	errs field.ErrorList
	// unknown holds, by the path of a map with keys the type does not
	// have, the keys the type does have (for a "did you mean").
	unknown map[string][]string
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	durationType    = reflect.TypeFor[metav1.Duration]()
)

// check returns v, with everything inside it that cannot be decoded
// removed, and true; or false when v itself cannot be decoded into a t
// (after recording why), for the caller to remove it.
func (c *checker) check(v any, t reflect.Type, p *field.Path) (any, bool) {
	if v == nil {
		return nil, true
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if pt := reflect.PointerTo(t); pt.Implements(jsonUnmarshaler) || pt.Implements(textUnmarshaler) {
		return c.custom(v, t, p)
	}
	switch t.Kind() {
	case reflect.Interface:
		return v, true
	case reflect.Struct:
		return c.object(v, t, p)
	case reflect.Map:
		return c.mapOf(v, t, p)
	case reflect.Slice, reflect.Array:
		return c.list(v, t, p)
	}
	if !scalarFits(v, t) {
		return c.wrongType(v, t, p)
	}
	return v, true
}

// custom decodes v with the type's own decoder and reports its error.
func (c *checker) custom(v any, t reflect.Type, p *field.Path) (any, bool) {
	data, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(data, reflect.New(t).Interface())
	}
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return v, true
	case errors.As(err, &typeErr):
		return c.wrongType(v, t, p)
	case t == durationType:
		c.errs = append(c.errs, decodeErr(field.Invalid(p, v, "must be "+friendlyType(t))))
	default:
		c.errs = append(c.errs, decodeErr(field.Invalid(p, field.OmitValueType{}, err.Error())))
	}
	return nil, false
}

// object checks a map meant for a struct. A key of the wrong type is
// removed (a null would reach a custom decoder, which may refuse it);
// unknown keys are left for the strict decoder.
func (c *checker) object(v any, t reflect.Type, p *field.Path) (any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return c.wrongType(v, t, p)
	}
	fields := jsonFields(t)
	for k, e := range m {
		f, known := fields[k]
		if !known {
			c.unknown[p.String()] = slices.Sorted(maps.Keys(fields))
			continue
		}
		c.keep(m, k, e, f, p.Child(k))
	}
	return m, true
}

func (c *checker) mapOf(v any, t reflect.Type, p *field.Path) (any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return c.wrongType(v, t, p)
	}
	for k, e := range m {
		c.keep(m, k, e, t.Elem(), p.Key(k))
	}
	return m, true
}

// keep checks m[k], removing it when it cannot be decoded.
func (c *checker) keep(m map[string]any, k string, e any, t reflect.Type, p *field.Path) {
	if e, ok := c.check(e, t, p); ok {
		m[k] = e
	} else {
		delete(m, k)
	}
}

// list checks a list; an element of the wrong type becomes null, so that
// the others keep their indexes.
func (c *checker) list(v any, t reflect.Type, p *field.Path) (any, bool) {
	if t.Elem().Kind() == reflect.Uint8 { // []byte is written as a base64 string.
		if _, ok := v.(string); ok {
			return v, true
		}
		return c.wrongType(v, t, p)
	}
	l, ok := v.([]any)
	if !ok {
		return c.wrongType(v, t, p)
	}
	for i, e := range l {
		l[i], _ = c.check(e, t.Elem(), p.Index(i))
	}
	return l, true
}

func (c *checker) wrongType(v any, t reflect.Type, p *field.Path) (any, bool) {
	c.errs = append(c.errs, decodeErr(field.Invalid(p, field.OmitValueType{}, typeMessage(v, t))))
	return nil, false
}

// scalarFits reports whether the JSON scalar v decodes into a t.
func scalarFits(v any, t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String:
		_, ok := v.(string)
		return ok
	case reflect.Bool:
		_, ok := v.(bool)
		return ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		_, err := strconv.ParseInt(string(n), 10, t.Bits())
		return ok && err == nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, ok := v.(json.Number)
		_, err := strconv.ParseUint(string(n), 10, t.Bits())
		return ok && err == nil
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		_, err := strconv.ParseFloat(string(n), t.Bits())
		return ok && err == nil
	}
	return false
}

// typeMessage says, in the words of the YAML the user wrote, what a value
// must be and what it is. It never repeats the value: it may be a secret
// written where a reference belongs.
func typeMessage(v any, t reflect.Type) string {
	want, got := friendlyType(t), yamlKind(v)
	msg := fmt.Sprintf("must be %s, not %s", want, got)
	switch {
	case t == secretRefType:
		msg += ": write {file: /path/to/secret} or {env: VARIABLE}; credentials are never written into the config"
	case t.Kind() == reflect.String && got == "a boolean":
		msg += `: YAML reads unquoted true/false, yes/no, on/off and y/n (any case) as booleans; quote the value, e.g. "yes"`
	case t.Kind() == reflect.String && got == "a number":
		msg += `: YAML reads unquoted digits as a number; quote the value, e.g. "0123"`
	case t.Kind() == reflect.Bool && got == "a string":
		msg += ": write true or false without quotes"
	}
	return msg
}

// friendlyType names a Go type the way the config file's reader sees it.
func friendlyType(t reflect.Type) string {
	switch t {
	case secretRefType:
		return "a secret reference"
	case durationType:
		return "a duration such as 30s, 5m or 1h30m"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "a map (key: value)"
}

// yamlKind names the kind of a decoded value in YAML's words.
func yamlKind(v any) string {
	switch v := v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			return "a number"
		}
		if strings.HasPrefix(string(v), "-") {
			return "a negative number"
		}
		return "a number"
	case []any:
		return "a list"
	}
	return "a map"
}

// jsonFields maps the JSON names of t's fields, as encoding/json decodes
// them (embedded structs' fields promoted unless a shallower one has the
// name), to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			embedded = append(embedded, f.Type)
		case !f.IsExported():
		case name != "":
			out[name] = f.Type
		default:
			out[f.Name] = f.Type
		}
	}
	for _, e := range embedded {
		for k, ft := range jsonFields(e) {
			if _, ok := out[k]; !ok {
				out[k] = ft
			}
		}
	}
	return out
}

// strictErrors turns the decoder's unknown and duplicate key errors, which
// carry their paths, into field errors under base.
func (c *checker) strictErrors(base *field.Path, strict []error) field.ErrorList {
	var errs field.ErrorList
	for _, e := range strict {
		var fe kjson.FieldError
		if !errors.As(e, &fe) {
			errs = append(errs, decodeErr(field.Invalid(base, field.OmitValueType{}, e.Error())))
			continue
		}
		p, parent, key := joinPath(base, fe.FieldPath())
		if strings.HasPrefix(e.Error(), "duplicate") {
			errs = append(errs, decodeErr(field.Forbidden(p, "set more than once: keep one")))
			continue
		}
		errs = append(errs, decodeErr(field.Forbidden(p, "unknown field: remove it or fix its spelling"+suggest(key, c.unknown[parent.String()]))))
	}
	return errs
}

// joinPath appends a decoder's path ("a.b[2].c") to base, returning the
// result, its parent and its last key.
func joinPath(base *field.Path, s string) (p, parent *field.Path, key string) {
	p = base
	for part := range strings.SplitSeq(s, ".") {
		name, rest, _ := strings.Cut(part, "[")
		parent, key = p, name
		p = child(p, name)
		for rest != "" {
			idx, next, _ := strings.Cut(rest, "]")
			n, _ := strconv.Atoi(idx)
			p = p.Index(n)
			rest = strings.TrimPrefix(next, "[")
		}
	}
	return p, parent, key
}

func child(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}

// suggest returns ` (did you mean "x"?)` for the known key closest to key,
// when one is close enough to be a misspelling.
func suggest(key string, known []string) string {
	best, bestD := "", max(2, len(key)/3)+1
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// prune drops, from a list holding decoding errors, the errors validation
// reported at or under a value of the wrong type or a missing section (it
// was left zero, so "required" and the like are noise), and repeated errors.
func prune(errs field.ErrorList) field.ErrorList {
	var wrong []string
	for _, e := range errs {
		if e.Origin == originDecode && (e.Type == field.ErrorTypeInvalid || e.Type == field.ErrorTypeRequired) {
			wrong = append(wrong, e.Field)
		}
	}
	seen := map[string]bool{}
	out := errs[:0:0]
	for _, e := range errs {
		key := string(e.Type) + "\x00" + e.Field + "\x00" + e.Detail
		if seen[key] || (e.Origin != originDecode && (under(e.Field, wrong) || requiredAbove(e, wrong))) {
			continue
		}
		seen[key] = true
		out = append(out, e)
	}
	return out
}

// requiredAbove reports whether e says a value is required that holds a
// value of the wrong type: the user did set it.
func requiredAbove(e *field.Error, wrong []string) bool {
	if e.Type != field.ErrorTypeRequired {
		return false
	}
	for _, w := range wrong {
		if under(w, []string{e.Field}) {
			return true
		}
	}
	return false
}

// under reports whether path is one of roots or inside one.
func under(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, r+".") || strings.HasPrefix(path, r+"[") {
			return true
		}
	}
	return false
}

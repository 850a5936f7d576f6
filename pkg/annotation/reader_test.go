package annotation

import (
	"errors"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

const n Name = "example.com/a"

var sgFormat = IDFormat{Pattern: regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`), Example: "sg-0123456789abcdef0", Hint: "the EC2 console"}

// read runs one reader method on {n: value} (or on no annotations when value
// is nil) and returns whether it set its output, the output, and Err.
func read(value *string, f func(r *Reader) (bool, any)) (bool, any, error) {
	m := map[string]string{}
	if value != nil {
		m[string(n)] = *value
	}
	r := NewReader(m)
	set, got := f(r)
	return set, got, r.Err()
}

func ptr(s string) *string { return &s }

func TestReaders(t *testing.T) {
	str := func(r *Reader) (bool, any) { s := "default"; ok := r.String(n, &s); return ok, s }
	boolean := func(r *Reader) (bool, any) { b := true; ok := r.Bool(n, &b); return ok, b }
	integer := func(r *Reader) (bool, any) { i := 7; ok := r.Int(n, 2, 10, &i); return ok, i }
	dur := func(r *Reader) (bool, any) {
		d := time.Minute
		ok := r.Duration(n, time.Second, time.Hour, &d)
		return ok, d
	}
	enum := func(r *Reader) (bool, any) { s := "TCP"; ok := r.Enum(n, &s, "TCP", "HTTP"); return ok, s }
	list := func(r *Reader) (bool, any) { var l []string; ok := r.List(n, &l); return ok, strings.Join(l, "|") }
	kv := func(r *Reader) (bool, any) {
		var m map[string]string
		ok := r.Map(n, &m)
		keys := make([]string, 0, len(m))
		for k, v := range m {
			keys = append(keys, k+"="+v)
		}
		slices.Sort(keys)
		return ok, strings.Join(keys, "|")
	}
	cidrs := func(r *Reader) (bool, any) {
		var p []netip.Prefix
		ok := r.CIDRs(n, &p)
		s := make([]string, len(p))
		for i := range p {
			s[i] = p[i].String()
		}
		return ok, strings.Join(s, "|")
	}
	id := func(r *Reader) (bool, any) { s := ""; ok := r.ID(n, sgFormat, &s); return ok, s }
	ids := func(r *Reader) (bool, any) {
		var l []string
		ok := r.IDs(n, sgFormat, &l)
		return ok, strings.Join(l, "|")
	}

	tests := []struct {
		name    string
		read    func(r *Reader) (bool, any)
		value   *string
		want    any
		wantErr string // "" for none
	}{
		{"string unset keeps default", str, nil, "default", ""},
		{"string trimmed", str, ptr(" x "), "x", ""},
		{"string empty", str, ptr(" "), "default", "must not be empty"},
		{"bool unset", boolean, nil, true, ""},
		{"bool false", boolean, ptr("false"), false, ""},
		{"bool yes refused", boolean, ptr("yes"), true, `must be "true" or "false"`},
		{"int in range", integer, ptr("10"), 10, ""},
		{"int below", integer, ptr("1"), 7, "from 2 to 10"},
		{"int not a number", integer, ptr("ten"), 7, "from 2 to 10"},
		{"duration", dur, ptr("90s"), 90 * time.Second, ""},
		{"duration bare seconds", dur, ptr("30"), 30 * time.Second, ""},
		{"duration too long", dur, ptr("2h"), time.Minute, "from 1s to 1h0m0s"},
		{"duration garbage", dur, ptr("soon"), time.Minute, "must be a duration"},
		{"enum", enum, ptr("HTTP"), "HTTP", ""},
		{"enum wrong case", enum, ptr("http"), "TCP", "must be one of TCP, HTTP"},
		{"list", list, ptr("a, b ,c"), "a|b|c", ""},
		{"list empty entry", list, ptr("a,,b"), "", "entry 2 is empty"},
		{"list empty", list, ptr(""), "", "must not be empty"},
		{"map", kv, ptr("a=1, b = 2,c="), "a=1|b=2|c=", ""},
		{"map not kv", kv, ptr("a=1,b"), "", `"b" is not key=value`},
		{"map repeated key", kv, ptr("a=1,a=2"), "", `key "a" is given twice`},
		{"cidrs", cidrs, ptr("10.0.0.0/8, 2001:db8::/32"), "10.0.0.0/8|2001:db8::/32", ""},
		{"cidrs host bits", cidrs, ptr("10.0.0.1/8"), "", "write 10.0.0.0/8"},
		{"cidrs garbage", cidrs, ptr("10.0.0.0"), "", "not a CIDR prefix"},
		{"id", id, ptr("sg-0123abcd"), "sg-0123abcd", ""},
		{"id wrong", id, ptr("subnet-0123abcd"), "", "must be an ID like sg-0123456789abcdef0; find it with the EC2 console"},
		{"ids", ids, ptr("sg-0123abcd,sg-0123abce"), "sg-0123abcd|sg-0123abce", ""},
		{"ids repeated", ids, ptr("sg-0123abcd,sg-0123abcd"), "", "listed twice"},
		{"ids one wrong", ids, ptr("sg-0123abcd,sg-x"), "", `entry "sg-x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, got, err := read(tt.value, tt.read)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				if set != (tt.value != nil) {
					t.Errorf("set = %v with value %v", set, tt.value)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), string(n)) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, n, tt.wantErr)
				}
				if set {
					t.Error("a bad value reported as set")
				}
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReaderCollectsEveryProblem(t *testing.T) {
	r := NewReader(map[string]string{"a/x": "nope", "a/y": "99", "a/z": "fine"})
	var b bool
	var i int
	var s string
	r.Bool("a/x", &b)
	r.Int("a/y", 1, 10, &i)
	r.String("a/z", &s)
	r.Invalid("a/z", "fine", "must not be fine together with a/y")
	err := r.Err()
	ue, ok := backends.AsUserError(err)
	if !ok || ue.Reason != ReasonInvalid {
		t.Fatalf("Err() = %v, want a UserError with reason %s", err, ReasonInvalid)
	}
	for _, want := range []string{`a/x="nope"`, `a/y="99"`, `a/z="fine": must not be fine`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not report %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("%q spans lines; an event should not", err)
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 3 {
		t.Errorf("want the three problems unwrappable, got %v", err)
	}
	if NewReader(nil).Err() != nil {
		t.Error("an empty reader reports an error")
	}
}

package scale

import (
	"strings"
	"testing"
	"time"
)

// tracesSample is `go tool pprof -traces` output as it prints it (from a
// real profile, stacks shortened; the last two made up of the CCM's
// functions).
const tracesSample = `File: multicloud-ccm
Type: cpu
Time: 2026-12-03 14:41:37 UTC
Duration: 398.62ms, Total samples = 110ms (27.60%)
-----------+-------------------------------------------------------
      10ms   runtime.unlock2
             runtime.unlockWithRank (inline)
             runtime.goschedImpl
             runtime.mcall
-----------+-------------------------------------------------------
      20ms   reflect.Value.OverflowInt (inline)
             encoding/json.(*decodeState).literalStore
             encoding/json.Unmarshal
             k8s.io/apimachinery/pkg/runtime/serializer/json.(*Serializer).Decode
             k8s.io/client-go/rest.Result.Into
-----------+-------------------------------------------------------
      1.5s   runtime.mallocgc
             slices.Sort[go.shape.[]string]
             github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws.(*backend).ensure
             github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend.(*Member).EnsureLoadBalancer
             github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller.(*Controller).sync
-----------+-------------------------------------------------------
      30ms   github.com/aws/smithy-go/encoding/httpbinding.(*Encoder).Encode
             github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2.(*Client).RegisterTargets
             github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws.(*backend).register
             github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller.(*Controller).sync
-----------+-------------------------------------------------------
`

// TestProfileSplit: each sample is charged to the frame nearest its leaf
// with a class (allocation and sorting to their caller, the runtime alone
// to "runtime"), and the inclusive figures count every sample through a
// package.
func TestProfileSplit(t *testing.T) {
	samples, err := readTraces(strings.NewReader(tracesSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 4 {
		t.Fatalf("read %d samples, want 4: %+v", len(samples), samples)
	}
	by, incl, total, err := splitSamples(samples)
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	if total != 1560*ms {
		t.Errorf("total %v, want 1.56s", total)
	}
	for class, want := range map[string]time.Duration{"runtime": 10 * ms, "JSON": 20 * ms, "aws backend": 1500 * ms, "AWS SDK": 30 * ms} {
		if by[class] != want {
			t.Errorf("by package %q: %v, want %v (all: %v)", class, by[class], want, by)
		}
	}
	for class, want := range map[string]time.Duration{"lbcontroller and below": 1530 * ms, "aws backend and below": 1530 * ms, "router and below": 1500 * ms, "AWS SDK and below": 30 * ms} {
		if incl[class] != want {
			t.Errorf("inclusive %q: %v, want %v (all: %v)", class, incl[class], want, incl)
		}
	}
	out := formatSplit(by, incl, total, 3.12, 1000)
	if !strings.Contains(out, "aws backend") || !strings.Contains(out, "3.12 ms each") {
		t.Errorf("formatSplit:\n%s", out)
	}
}

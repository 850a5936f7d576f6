package backends

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// TestRefused: a call the mutation gate refused is told apart however the
// SDK wrapped it, and classed other (not unavailable: nothing was sent);
// other failures are not refusals.
func TestRefused(t *testing.T) {
	refused := fmt.Errorf("creating load balancer: %w", &url.Error{Op: "Post", URL: "http://octavia",
		Err: fmt.Errorf("backend %q, load-balancer API: %w: %w", "os", cloudapi.ErrMutationRefused, errors.New("deposed"))})
	if !Refused(refused) {
		t.Errorf("Refused(%v) = false", refused)
	}
	if c := ClassifyError(refused); c != ClassOther {
		t.Errorf("ClassifyError of a refusal = %s, want other", c)
	}
	for _, err := range []error{nil, context.DeadlineExceeded, errors.New("mutating cloud call refused"), NewUserError("Bad", errors.New("fix it"))} {
		if Refused(err) {
			t.Errorf("Refused(%v) = true", err)
		}
	}
}

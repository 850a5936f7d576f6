package router

import (
	"context"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
)

// DecisionForWrite returns a context under which EnsureLoadBalancer
// records its decision in the Decision returned and leaves the Service's
// write to the caller, who writes it once from that decision (see
// lifecycle.ForWrite): the decision Decide returns for `plan`.
func DecisionForWrite(ctx context.Context) (context.Context, *Decision) {
	return lifecycle.ForWrite(ctx)
}

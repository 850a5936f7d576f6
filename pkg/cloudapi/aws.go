package cloudapi

import (
	"context"
	"strings"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// AWS APIs, the keys of an AWS backend's rateLimits.
const (
	APIEC2   = "ec2"
	APIELBv2 = "elbv2"
)

// AWSDefaults are the AWS backend's default budgets: AWS's own buckets for
// an account and region, as ceilings. The default mode (ModeAdaptive)
// starts there and slows down when AWS throttles the CCM anyway (another
// tool of the account spends the same bucket), as the AWS SDK's adaptive
// retry mode does; the buckets are AWS's, so with nobody else spending
// them the CCM goes as fast as AWS lets it, never slower for a guess.
//   - EC2 (EC2 API reference, "Request throttling"): one bucket per
//     action; non-mutating actions 100 tokens refilled at 20 a second,
//     mutating actions 200 tokens refilled at 5.
//   - ELBv2 (ELB user guide, "Request throttling for the ELB API"): one
//     bucket for every Describe* action, 40 tokens refilled at 10 a
//     second; mutations take buckets of their own, by group of actions,
//     taken here one per action at 20 tokens refilled at 2 a second (the
//     AWS fake's, internal/awsfake). Where the account's bucket is
//     smaller, or one group's actions run together, AWS throttles and the
//     adaptive bucket slows down.
//
// Each bucket holds one token less than AWS's: the CCM takes a token when
// it sends a request, AWS when the request arrives, and a request that
// arrives sooner after the one before than it was sent (the first one's
// connection set up, a slow answer then a fast one) finds AWS's bucket a
// fraction of a token emptier than the CCM's. One token is that margin for
// up to a refill interval (100 ms for ELBv2's reads); without it a burst
// that spent the bucket was throttled once in most runs, and the adaptive
// cut that followed made it about 75 % slower (review probe 62).
var AWSDefaults = map[string]RateLimit{
	APIEC2:   {QPS: 20, Bucket: 100 - awsMargin, QPSWrite: 5, BucketWrite: 200 - awsMargin, PerActionReads: true, PerActionWrites: true},
	APIELBv2: {QPS: 10, Bucket: 40 - awsMargin, QPSWrite: 2, BucketWrite: 20 - awsMargin, PerActionWrites: true},
}

// awsMargin is the tokens each default bucket holds fewer than AWS's.
const awsMargin = 1

// awsAPIs maps the SDK's service IDs to the API names of the budget.
var awsAPIs = map[string]string{
	"EC2":                         APIEC2,
	"Elastic Load Balancing v2":   APIELBv2,
	"Elastic Load Balancing":      "elb",
	"STS":                         "sts",
	"Resource Groups Tagging API": "tagging",
}

// AWSAPIName returns the budget's name of an SDK service ID.
func AWSAPIName(serviceID string) string {
	if api, ok := awsAPIs[serviceID]; ok {
		return api
	}
	return strings.ToLower(strings.ReplaceAll(serviceID, " ", "-"))
}

// AWSMutating tells whether an AWS action changes state: every action but
// Describe*, Get* and List*.
func AWSMutating(action string) bool {
	for _, p := range []string{"Describe", "Get", "List"} {
		if strings.HasPrefix(action, p) {
			return false
		}
	}
	return true
}

// AWSAPIOptions returns the SDK client option that makes every attempt of
// every request (retries included: each costs AWS a token) wait for a
// token of b and be counted, an attempt isThrottle says AWS throttled
// with the outcome throttled. isThrottle is the AWS backend's, from the
// list of throttling codes the SDK's retryer uses: the errors metric
// classes errors by the same list. Add it to a client's APIOptions.
func AWSAPIOptions(b *Budget, isThrottle func(error) bool) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		mw := middleware.FinalizeMiddlewareFunc("multicloud-ccm/APIBudget", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			api := AWSAPIName(awsmiddleware.GetServiceID(ctx))
			action := awsmiddleware.GetOperationName(ctx)
			write := AWSMutating(action)
			if err := b.WaitAction(ctx, api, action, write); err != nil {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, err
			}
			start := time.Now()
			out, md, err := next.HandleFinalize(ctx, in)
			outcome := OutcomeSuccess
			switch {
			case err != nil && isThrottle(err):
				outcome = OutcomeThrottled
			case err != nil:
				outcome = OutcomeError
			}
			b.Observe(api, action, write, outcome, time.Since(start))
			return out, md, err
		})
		// After the retryer: each attempt takes its own token.
		if _, ok := stack.Finalize.Get("Retry"); ok {
			return stack.Finalize.Insert(mw, "Retry", middleware.After)
		}
		return stack.Finalize.Add(mw, middleware.Before)
	}
}

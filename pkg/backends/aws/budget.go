package aws

import (
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// budgetKey names the AWS account and region whose API buckets a backend
// spends: AWS throttles per account and region, so two backends with the
// same key share one client-side budget (cloudapi.NewSharedBudget) instead
// of each taking the share one should. The account is what the config
// evidently names: the account of the assumed role's ARN, else the
// credentials' source (the same access-key file or variable, the same
// profile, or the default chain); the endpoints too, for a private
// endpoint (or a test's fake) is another API. Two backends using different
// keys of one account are not recognised as one account.
func budgetKey(s *Settings) string {
	who := "default credential chain"
	switch {
	case s.AssumeRole != nil:
		who = "role account " + roleAccount(s.AssumeRole.RoleARN)
	case s.Credentials != nil:
		who = fmt.Sprintf("access key %+v", s.Credentials.AccessKeyID)
	case s.Profile != "":
		who = "profile " + s.Profile
	}
	return strings.Join([]string{"aws", s.Region, s.Endpoints.EC2, s.Endpoints.ELBv2, who}, "|")
}

// sharedBudgetKey is budgetKey with the limits: backends of one account
// share a budget only when configured alike (checkBudgetsAcross refuses a
// config where they are not; a test building backends against one fake
// with different limits gets a budget each).
func sharedBudgetKey(s *Settings) string {
	return fmt.Sprintf("%s|%v", budgetKey(s), normalLimits(s.RateLimits))
}

// roleAccount is the account ID of an IAM role ARN
// (arn:aws:iam::123456789012:role/name), or the ARN when it has none.
func roleAccount(arn string) string {
	if parts := strings.Split(arn, ":"); len(parts) >= 6 && parts[4] != "" {
		return parts[4]
	}
	return arn
}

// checkBudgetsAcross refuses two aws backends of one account and region
// (budgetKey) with different rateLimits: they share one budget, made with
// the first one's limits, so the second's would silently not apply.
func checkBudgetsAcross(sections []config.Section) field.ErrorList {
	type first struct {
		backend string
		path    *field.Path
		limits  map[string]cloudapi.RateLimit
	}
	seen := map[string]first{}
	var errs field.ErrorList
	for _, sec := range sections {
		s, ok := sec.Settings.(*Settings)
		if !ok {
			continue
		}
		key := budgetKey(s)
		f, dup := seen[key]
		if !dup {
			seen[key] = first{backend: sec.Backend, path: sec.Path, limits: s.RateLimits}
			continue
		}
		if !sameLimits(f.limits, s.RateLimits) {
			errs = append(errs, field.Invalid(sec.Path.Child("rateLimits"), s.RateLimits, fmt.Sprintf(
				"backend %q is in the same AWS account and region as backend %q (%s: the same credentials or role account, region %s and endpoints), and AWS throttles per account and region, so the two share one API budget: set the same rateLimits in both (%s)",
				sec.Backend, f.backend, f.path, s.Region, f.path.Child("rateLimits"))))
		}
	}
	return errs
}

// sameLimits compares two rateLimits sections, an empty one equal to none,
// a mode left out equal to the default one.
func sameLimits(a, b map[string]cloudapi.RateLimit) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(normalLimits(a), normalLimits(b))
}

// normalLimits is a rateLimits section with each mode left out written as
// the default (cloudapi.ModeAdaptive): the same budget, said either way.
func normalLimits(m map[string]cloudapi.RateLimit) map[string]cloudapi.RateLimit {
	out := make(map[string]cloudapi.RateLimit, len(m))
	for api, l := range m {
		if l.Mode == "" {
			l.Mode = cloudapi.ModeAdaptive
		}
		out[api] = l
	}
	return out
}

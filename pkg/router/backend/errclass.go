package backend

import (
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// ErrorClass is the kind of a failed backend call, as the errors metric
// shows it.
type ErrorClass int

// The error classes, as the errors metric's class label names them.
const (
	ClassThrottled ErrorClass = iota
	ClassAuth
	ClassNotFound
	ClassOther
	numErrorClasses
)

var errorClassNames = [numErrorClasses]string{"throttled", "auth", "not_found", "other"}

func (c ErrorClass) String() string { return errorClassNames[c] }

// Classify tells what kind of failure err is: the cloud throttled the call,
// refused the credentials, or did not find the thing asked for; anything
// else (an outage, a timeout, a user error, a wait) is other. The router
// imports no cloud SDK: the backend types class their SDKs' errors
// (backends.ClassifyError asks each type's Registration.ClassifyError);
// the metric keeps its four classes, unavailable and user counting as
// other.
func Classify(err error) ErrorClass {
	switch backends.ClassifyError(err) {
	case backends.ClassThrottled:
		return ClassThrottled
	case backends.ClassAuth:
		return ClassAuth
	case backends.ClassNotFound:
		return ClassNotFound
	}
	return ClassOther
}

package plugin

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/vkprovider/vkprovider/sdk/go/vkproviderv1"
)

// Code is a provider error class of the vkprovider contract.
type Code string

// The error classes (docs/plugin-api.md "Errors"). Anything else is treated as Transient.
const (
	InvalidRequest Code = "InvalidRequest" // will never work as written: fail the pod
	NoCapacity     Code = "NoCapacity"     // none of this offer now: try the next candidate
	Transient      Code = "Transient"      // retry later (optionally after RetryAfter seconds)
	QuotaOrBilling Code = "QuotaOrBilling" // stop using this provider, alert an operator
	NotFound       Code = "NotFound"       // no such deployment
)

var grpcCodes = map[Code]codes.Code{
	InvalidRequest: codes.InvalidArgument,
	NoCapacity:     codes.ResourceExhausted,
	Transient:      codes.Unavailable,
	QuotaOrBilling: codes.FailedPrecondition,
	NotFound:       codes.NotFound,
}

// Error returns a gRPC error carrying the typed vkprovider.v1.ErrorDetail in the status details,
// which the host turns back into the same error class, message and retry_after.
func Error(code Code, message string) error {
	return errorDetail(&pb.ErrorDetail{Code: string(code), Message: message})
}

// TransientAfter is a Transient error the host must not retry before retryAfter seconds.
func TransientAfter(message string, retryAfter float64) error {
	return errorDetail(&pb.ErrorDetail{Code: string(Transient), Message: message, RetryAfterSeconds: &retryAfter})
}

func errorDetail(detail *pb.ErrorDetail) error {
	grpcCode, ok := grpcCodes[Code(detail.Code)]
	if !ok {
		grpcCode = codes.Unavailable
	}
	st, err := status.New(grpcCode, detail.Message).WithDetails(detail)
	if err != nil { // cannot happen for a valid message; still report the class by status code
		return status.Error(grpcCode, detail.Message)
	}
	return st.Err()
}

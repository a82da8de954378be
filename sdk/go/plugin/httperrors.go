package plugin

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrorForStatus is the error of a failed HTTP call to a cloud API, read through the one status
// table every vkprovider adapter shares (vkprovider.plugins.api.error_for_status):
//
//   - 429 and 5xx: Transient, with retryAfter seconds when the cloud sent Retry-After
//   - 401, 402, 403: QuotaOrBilling (a bad key or an empty balance fails every call alike)
//   - 404: NotFound
//   - any other 4xx: InvalidRequest
//   - anything else that is not a success (1xx, 3xx): Transient
//
// The same status means different things on different endpoints of different clouds: pass the
// class you read from the operation and the error's wording as override ("" lets the table
// decide), e.g. NoCapacity for a 400 that says "no instances available" on create.
func ErrorForStatus(status int, message string, retryAfter *float64, override Code) error {
	code := override
	if code == "" {
		code = classForStatus(status)
	}
	if code == Transient && retryAfter != nil {
		return TransientAfter(message, *retryAfter)
	}
	return Error(code, message)
}

func classForStatus(status int) Code {
	switch {
	case status == http.StatusTooManyRequests || status >= 500:
		return Transient
	case status == http.StatusUnauthorized || status == http.StatusPaymentRequired || status == http.StatusForbidden:
		return QuotaOrBilling
	case status == http.StatusNotFound:
		return NotFound
	case status >= 400 && status < 500:
		return InvalidRequest
	}
	return Transient
}

// RetryAfterSeconds reads a Retry-After header value, in seconds ("12", "2.5") or as an HTTP
// date, as seconds from now (0 for the past); nil when it is missing or unusable, so the host
// retries on its own backoff.
func RetryAfterSeconds(value string, now time.Time) *float64 {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil
	}
	if seconds, err := strconv.ParseFloat(value, 64); err == nil {
		if math.IsNaN(seconds) || math.IsInf(seconds, 0) {
			return nil
		}
		seconds = math.Max(0, seconds)
		return &seconds
	}
	when, err := http.ParseTime(value)
	if err != nil {
		return nil
	}
	seconds := math.Max(0, when.Sub(now).Seconds())
	return &seconds
}

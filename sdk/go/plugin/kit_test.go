package plugin

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	pb "github.com/vkprovider/vkprovider/sdk/go/vkproviderv1"
)

func detailOf(t *testing.T, err error) *pb.ErrorDetail {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("not a gRPC status error: %v", err)
	}
	for _, d := range st.Details() {
		if detail, ok := d.(*pb.ErrorDetail); ok {
			return detail
		}
	}
	t.Fatalf("no ErrorDetail in %v", err)
	return nil
}

func TestErrorForStatusIsTheSharedTable(t *testing.T) {
	cases := map[int]Code{
		400: InvalidRequest, 401: QuotaOrBilling, 402: QuotaOrBilling, 403: QuotaOrBilling,
		404: NotFound, 409: InvalidRequest, 422: InvalidRequest, 429: Transient, 500: Transient,
		503: Transient, 301: Transient,
	}
	for status, want := range cases {
		detail := detailOf(t, ErrorForStatus(status, "create: nope", nil, ""))
		if Code(detail.Code) != want || detail.Message != "create: nope" {
			t.Errorf("status %d: got %s %q, want %s", status, detail.Code, detail.Message, want)
		}
	}
}

func TestOverrideAndRetryAfter(t *testing.T) {
	seven := 7.0
	if got := detailOf(t, ErrorForStatus(400, "sold out", nil, NoCapacity)); Code(got.Code) != NoCapacity {
		t.Errorf("override ignored: %s", got.Code)
	}
	got := detailOf(t, ErrorForStatus(429, "slow down", &seven, ""))
	if got.RetryAfterSeconds == nil || *got.RetryAfterSeconds != 7 {
		t.Errorf("retry_after lost: %v", got.RetryAfterSeconds)
	}
	if got := detailOf(t, ErrorForStatus(403, "m", &seven, "")); got.RetryAfterSeconds != nil {
		t.Errorf("retry_after on a non-Transient error: %v", *got.RetryAfterSeconds)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for value, want := range map[string]float64{"12": 12, " 2.5 ": 2.5, "-3": 0} {
		if got := RetryAfterSeconds(value, now); got == nil || *got != want {
			t.Errorf("%q: got %v, want %v", value, got, want)
		}
	}
	if got := RetryAfterSeconds(now.Add(30*time.Second).Format(http.TimeFormat), now); got == nil || *got != 30 {
		t.Errorf("HTTP date: got %v", got)
	}
	for _, value := range []string{"", "soon", "NaN", "+Inf"} {
		if got := RetryAfterSeconds(value, now); got != nil {
			t.Errorf("%q: got %v, want nil", value, *got)
		}
	}
}

func TestUIDLocksSerialiseOneUIDAndAreDroppedWhenUnused(t *testing.T) {
	var locks UIDLocks
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := locks.Lock("uid-1")
			defer unlock()
			now := inside.Add(1)
			for {
				seen := most.Load()
				if now <= seen || most.CompareAndSwap(seen, now) {
					break
				}
			}
			time.Sleep(time.Millisecond) // give a racer the chance to get in, were it possible
			inside.Add(-1)
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d holders of one UID at once", most.Load())
	}
	if locks.Len() != 0 {
		t.Errorf("%d entries left behind", locks.Len())
	}
	unlockA := locks.Lock("a")
	done := make(chan struct{})
	go func() { defer close(done); locks.Lock("b")() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("another UID waited for a held one")
	}
	unlockA()
	if locks.Len() != 0 {
		t.Errorf("entries left: %d", locks.Len())
	}
}

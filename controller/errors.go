package controller

import (
	"errors"
	"fmt"
	"time"
)

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// NewPermanentError wraps err so that Impl logs it and drops the key instead
// of retrying: use it for failures only a change to the object can fix, such
// as an invalid spec. It returns nil when err is nil. The result unwraps to
// err, so errors.Is and errors.As still see the cause.
func NewPermanentError(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanentError reports whether err, or any error it wraps, was made by
// NewPermanentError.
func IsPermanentError(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// requeueAfterError asks for another reconcile of the same key later.
type requeueAfterError struct{ after time.Duration }

func (e *requeueAfterError) Error() string {
	return fmt.Sprintf("requeue after %s", e.after)
}

// NewRequeueAfter returns an error that makes Impl reconcile the same key
// again after d, without counting the attempt as a failure: the key's
// backoff is reset and nothing is logged above debug level. Use it to poll
// for a condition outside the informers' view (e.g. a certificate nearing
// expiry). A d of zero or less requeues at once.
func NewRequeueAfter(d time.Duration) error {
	return &requeueAfterError{after: d}
}

// IsRequeueAfter returns the delay and true when err, or any error it
// wraps, was made by NewRequeueAfter; otherwise 0 and false.
func IsRequeueAfter(err error) (time.Duration, bool) {
	var r *requeueAfterError
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}

// waitingError marks an error that is an expected wait, not a failure.
type waitingError struct{ err error }

func (e *waitingError) Error() string { return e.err.Error() }
func (e *waitingError) Unwrap() error { return e.err }

// NewWaiting wraps err, whose text it keeps, to say that the reconcile
// waits for something another component makes (a Secret's key another
// process writes at start-up, say): Impl retries it with backoff as any
// error but logs it at info level with the word "waiting", so that an
// expected start-up wait does not read as the cause of a problem. It
// returns nil when err is nil. A conflict from the API server is logged
// the same way without it.
func NewWaiting(err error) error {
	if err == nil {
		return nil
	}
	return &waitingError{err: err}
}

// IsWaiting reports whether err, or any error it wraps, was made by
// NewWaiting.
func IsWaiting(err error) bool {
	var w *waitingError
	return errors.As(err, &w)
}

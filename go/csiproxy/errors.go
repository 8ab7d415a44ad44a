package csiproxy

import "fmt"

// Code is a gRPC status code, as the pipe would answer.
type Code int32

// The codes the library answers with.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

var codeNames = [...]string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded",
	"NotFound", "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
	"Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated"}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int32(c))
}

// Error is a refused or failed call: the gRPC code and message the same
// request gets over csi-proxy's pipe.
type Error struct {
	code    Code
	message string
}

func (e *Error) Error() string { return fmt.Sprintf("csi-proxy: %v: %s", e.code, e.message) }

// Code is the gRPC status code.
func (e *Error) Code() Code { return e.code }

// Message is the status message.
func (e *Error) Message() string { return e.message }

// CodeOf returns the code of an *Error (OK for nil, Unknown for other
// errors).
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	if e, ok := err.(*Error); ok {
		return e.code
	}
	return Unknown
}

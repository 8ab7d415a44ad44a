package csiproxy

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

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

// Is makes errors.Is(err, fs.ErrNotExist), fs.ErrExist and
// fs.ErrPermission hold for NotFound, AlreadyExists and PermissionDenied,
// as they do for the os errors of upstream's library host.
func (e *Error) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.code == NotFound
	case fs.ErrExist:
		return e.code == AlreadyExists
	case fs.ErrPermission:
		return e.code == PermissionDenied
	}
	return false
}

// CodeOf returns the code of an *Error, also wrapped, or of the
// *fs.PathError a Filesystem call answers (OK for nil, Unknown for other
// errors).
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.code
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Op, pathOpPrefix) {
		for code, errno := range errnos {
			if pe.Err == errno {
				return code
			}
		}
	}
	return Unknown
}

const pathOpPrefix = "csi-proxy "

// pathError is how a Filesystem call answers NotFound, AlreadyExists and
// PermissionDenied: upstream's library host answers these calls with os
// errors (*fs.PathError from os.Lstat, os.Remove, os.MkdirAll, ...), and
// driver code tests them with os.IsNotExist, os.IsExist and os.IsPermission,
// which (unlike errors.Is) see only an *fs.PathError (or *os.LinkError,
// *os.SyscallError) around a syscall.Errno. So the error is one: Op names
// the call, its code and csi-proxy's message, Path is the path, Err the
// system's errno for the code. CodeOf still gives the code; every other
// code stays an *Error.
func pathError(method, path string, err error) error {
	e, ok := err.(*Error)
	if !ok {
		return err
	}
	errno, ok := errnos[e.code]
	if !ok {
		return err
	}
	return &fs.PathError{
		Op:   fmt.Sprintf("%s%s (%v: %s)", pathOpPrefix, method, e.code, e.message),
		Path: path,
		Err:  errno,
	}
}

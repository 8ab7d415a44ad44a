//go:build windows
// +build windows

package csiproxy

import "syscall"

// errnos are the Win32 errors Go's os package answers for the same
// conditions (syscall.Errno.Is maps each to its fs.Err*).
var errnos = map[Code]error{
	NotFound:         syscall.ERROR_FILE_NOT_FOUND,
	AlreadyExists:    syscall.ERROR_ALREADY_EXISTS,
	PermissionDenied: syscall.ERROR_ACCESS_DENIED,
}

//go:build !windows
// +build !windows

package csiproxy

import "syscall"

// errnos are the errno values Go's os package answers for the same
// conditions (syscall.Errno.Is maps each to its fs.Err*).
var errnos = map[Code]error{
	NotFound:         syscall.ENOENT,
	AlreadyExists:    syscall.EEXIST,
	PermissionDenied: syscall.EACCES,
}

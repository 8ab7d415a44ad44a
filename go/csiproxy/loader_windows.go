//go:build windows
// +build windows

package csiproxy

import (
	"fmt"
	"sync"
	"syscall"
	"unsafe"
)

// The C ABI of csi_proxy.h, by syscall.LazyDLL: every argument is a scalar
// or a pointer (no struct by value), so LazyProc.Call can express it.

type cStr struct {
	ptr *byte
	len uintptr
}

type cList struct {
	items *cStr
	len   uintptr
}

// cOptions is CsiProxyOptions, field for field.
type cOptions struct {
	abiVersion          uint32
	requirePrivacy      uint32
	kubeletPath         cStr
	workingDirs         cList
	volumeFsType        cStr
	allowedServices     cList
	protectedServices   cList
	unprotectedServices cList
	serviceName         cStr
}

// cBuffer is CsiProxyBuffer (memory of the library, not of Go).
type cBuffer struct {
	ptr *byte
	len uintptr
}

type library struct {
	abi, hostNew, hostFree, callProc, bufferFree *syscall.LazyProc
}

var (
	librariesMu sync.Mutex
	libraries   = map[string]*library{}
)

func load(path string) (*library, error) {
	if path == "" {
		path = "csi_proxy.dll"
	}
	librariesMu.Lock()
	defer librariesMu.Unlock()
	if l, ok := libraries[path]; ok {
		return l, nil
	}
	dll := syscall.NewLazyDLL(path)
	if err := dll.Load(); err != nil {
		return nil, fmt.Errorf("csiproxy: load %s: %w", path, err)
	}
	l := &library{
		abi:        dll.NewProc("csi_proxy_abi_version"),
		hostNew:    dll.NewProc("csi_proxy_host_new"),
		hostFree:   dll.NewProc("csi_proxy_host_free"),
		callProc:   dll.NewProc("csi_proxy_call"),
		bufferFree: dll.NewProc("csi_proxy_buffer_free"),
	}
	for _, p := range []*syscall.LazyProc{l.abi, l.hostNew, l.hostFree, l.callProc, l.bufferFree} {
		if err := p.Find(); err != nil {
			return nil, fmt.Errorf("csiproxy: %s: %w", path, err)
		}
	}
	if v, _, _ := l.abi.Call(); uint32(v) != ABIVersion {
		return nil, fmt.Errorf("csiproxy: %s has ABI version %d, this package needs %d", path, uint32(v), ABIVersion)
	}
	libraries[path] = l
	return l, nil
}

// bytesOf returns a pointer to a copy of s (nil when empty).
func bytesOf(s string) *byte {
	if s == "" {
		return nil
	}
	b := []byte(s)
	return &b[0]
}

func str(s string) cStr { return cStr{bytesOf(s), uintptr(len(s))} }

func list(v []string) cList {
	if len(v) == 0 {
		return cList{}
	}
	items := make([]cStr, len(v))
	for i, s := range v {
		items[i] = str(s)
	}
	return cList{&items[0], uintptr(len(items))}
}

// take copies a buffer of the library and gives it back.
func (l *library) take(b cBuffer) []byte {
	if b.ptr == nil {
		return nil
	}
	out := make([]byte, b.len)
	copy(out, unsafe.Slice(b.ptr, b.len))
	l.bufferFree.Call(uintptr(unsafe.Pointer(b.ptr)), b.len)
	return out
}

// Open loads the DLL (once per path) and creates a host.
func Open(o Options) (*Host, error) {
	l, err := load(o.DLL)
	if err != nil {
		return nil, err
	}
	privacy := uint32(1)
	if o.NoPrivacy {
		privacy = 0
	}
	opts := &cOptions{
		abiVersion:          ABIVersion,
		requirePrivacy:      privacy,
		kubeletPath:         str(o.KubeletPath),
		workingDirs:         list(o.WorkingDirs),
		volumeFsType:        str(o.VolumeFsType),
		allowedServices:     list(o.AllowedServices),
		protectedServices:   list(o.ProtectedServices),
		unprotectedServices: list(o.UnprotectedServices),
		serviceName:         str(o.ServiceName),
	}
	var handle uintptr
	var msg cBuffer
	r, _, _ := l.hostNew.Call(uintptr(unsafe.Pointer(opts)), uintptr(unsafe.Pointer(&handle)), uintptr(unsafe.Pointer(&msg)))
	text := l.take(msg)
	if code := Code(int32(uint32(r))); code != OK {
		return nil, &Error{code, string(text)}
	}
	return &Host{lib: l, handle: handle}, nil
}

// Close frees the host; no call may be running or follow.
func (h *Host) Close() error {
	if h.handle != 0 {
		h.lib.hostFree.Call(h.handle)
		h.handle = 0
	}
	return nil
}

func (l *library) call(handle uintptr, group, method string, req encoder) ([]byte, error) {
	g, m := []byte(group), []byte(method)
	var out cBuffer
	r, _, _ := l.callProc.Call(handle,
		uintptr(unsafe.Pointer(ptr(g))), uintptr(len(g)),
		uintptr(unsafe.Pointer(ptr(m))), uintptr(len(m)),
		uintptr(unsafe.Pointer(ptr(req))), uintptr(len(req)),
		uintptr(unsafe.Pointer(&out)))
	body := l.take(out)
	if code := Code(int32(uint32(r))); code != OK {
		return nil, &Error{code, string(body)}
	}
	return body, nil
}

func ptr(b []byte) *byte {
	if len(b) == 0 {
		return nil
	}
	return &b[0]
}

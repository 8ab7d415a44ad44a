//go:build windows
// +build windows

package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Named pipes with overlapped I/O, from the standard library alone (Debian
// packages neither go-winio nor golang.org/x/sys/windows). Overlapped, because
// grpc-go reads and writes one connection from two goroutines at once: on a
// synchronous handle Windows serializes the two, and the write would wait
// for the read, which waits for the answer to that write.

var (
	kernel32                = syscall.NewLazyDLL("kernel32.dll")
	procCreateEventW        = kernel32.NewProc("CreateEventW")
	procGetOverlappedResult = kernel32.NewProc("GetOverlappedResult")
)

const (
	errorMoreData         syscall.Errno = 234
	errorPipeBusy         syscall.Errno = 231
	errorPipeNotConnected syscall.Errno = 233
	errorNoData           syscall.Errno = 232
	waitTimeout                         = 0x102
	// As go-winio's DialPipe: the server may not impersonate the client.
	securitySqosPresent = 0x00100000
	securityAnonymous   = 0
)

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

type pipeConn struct {
	h      syscall.Handle
	name   string
	mu     sync.RWMutex // held shared by each I/O, exclusively by Close
	closed int32
}

// dialEndpoint opens a named pipe as go-winio's DialPipeContext does (which
// upstream's client uses), waiting while all its instances are busy.
func dialEndpoint(ctx context.Context, name string) (net.Conn, error) {
	p, err := syscall.UTF16PtrFromString(name)
	if err != nil {
		return nil, err
	}
	for {
		h, err := syscall.CreateFile(p, syscall.GENERIC_READ|syscall.GENERIC_WRITE, 0, nil,
			syscall.OPEN_EXISTING, syscall.FILE_FLAG_OVERLAPPED|securitySqosPresent|securityAnonymous, 0)
		if err == nil {
			return &pipeConn{h: h, name: name}, nil
		}
		if err != errorPipeBusy {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// io runs one overlapped ReadFile or WriteFile to completion. While it waits
// it checks every 50 ms whether the connection was closed, and then cancels.
func (c *pipeConn) io(b []byte, write bool) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if atomic.LoadInt32(&c.closed) != 0 {
		return 0, net.ErrClosed
	}
	ev, _, e := procCreateEventW.Call(0, 1, 0, 0)
	if ev == 0 {
		return 0, e
	}
	defer syscall.CloseHandle(syscall.Handle(ev))
	// The kernel writes ov, n and b until the operation completes, so none
	// may live on a goroutine stack (stacks move when they grow): ov and n
	// are heap-allocated (passing them to LazyProc.Call, which is
	// go:uintptrescapes, forces that), and b comes through the net.Conn
	// interface, whose arguments always escape to the heap.
	ov := new(syscall.Overlapped)
	ov.HEvent = syscall.Handle(ev)
	n := new(uint32)
	var err error
	if write {
		err = syscall.WriteFile(c.h, b, n, ov)
	} else {
		err = syscall.ReadFile(c.h, b, n, ov)
	}
	if err == syscall.ERROR_IO_PENDING {
		for {
			r, _ := syscall.WaitForSingleObject(ov.HEvent, 50)
			if r != waitTimeout {
				break
			}
			if atomic.LoadInt32(&c.closed) != 0 {
				syscall.CancelIoEx(c.h, ov)
				break
			}
		}
		r, _, e := procGetOverlappedResult.Call(uintptr(c.h), uintptr(unsafe.Pointer(ov)),
			uintptr(unsafe.Pointer(n)), 1)
		err = nil
		if r == 0 {
			err = e
		}
	}
	runtime.KeepAlive(b)
	switch {
	case err == nil, err == errorMoreData:
		if !write && *n == 0 && len(b) > 0 {
			return 0, io.EOF
		}
		return int(*n), nil
	case err == syscall.ERROR_BROKEN_PIPE, err == errorPipeNotConnected, err == errorNoData:
		if write {
			return int(*n), io.ErrClosedPipe
		}
		return int(*n), io.EOF
	case err == syscall.ERROR_OPERATION_ABORTED && atomic.LoadInt32(&c.closed) != 0:
		return int(*n), net.ErrClosed
	default:
		return int(*n), &net.OpError{Op: map[bool]string{true: "write", false: "read"}[write],
			Net: "pipe", Addr: pipeAddr(c.name), Err: err}
	}
}

func (c *pipeConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return c.io(b, false)
}

func (c *pipeConn) Write(b []byte) (int, error) {
	total := 0
	for total < len(b) {
		n, err := c.io(b[total:], true)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (c *pipeConn) Close() error {
	if !atomic.CompareAndSwapInt32(&c.closed, 0, 1) {
		return nil
	}
	syscall.CancelIoEx(c.h, nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	return syscall.CloseHandle(c.h)
}

func (c *pipeConn) LocalAddr() net.Addr  { return pipeAddr(c.name) }
func (c *pipeConn) RemoteAddr() net.Addr { return pipeAddr(c.name) }

// Deadlines are not supported; grpc-go does not set them on its transport.
func (c *pipeConn) SetDeadline(time.Time) error      { return errors.New("deadlines not supported") }
func (c *pipeConn) SetReadDeadline(time.Time) error  { return errors.New("deadlines not supported") }
func (c *pipeConn) SetWriteDeadline(time.Time) error { return errors.New("deadlines not supported") }

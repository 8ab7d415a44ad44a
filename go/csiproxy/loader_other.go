//go:build !windows
// +build !windows

package csiproxy

type library struct{}

// Open answers ErrUnsupported: outside Windows, plain Go (CGO_ENABLED=0)
// cannot load libcsi_proxy.so.
func Open(Options) (*Host, error) { return nil, ErrUnsupported }

// Close does nothing (no host can be opened here).
func (h *Host) Close() error { return nil }

func (l *library) call(uintptr, string, string, encoder) ([]byte, error) {
	return nil, ErrUnsupported
}

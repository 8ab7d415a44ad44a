//go:build !windows
// +build !windows

package csiproxy

import "testing"

func TestOpenIsUnsupportedOutsideWindows(t *testing.T) {
	if h, err := Open(Options{KubeletPath: "/var/lib/kubelet"}); err != ErrUnsupported || h != nil {
		t.Fatalf("%v %v", h, err)
	}
}

//go:build !windows
// +build !windows

package main

import (
	"context"
	"net"
)

// dialEndpoint connects to a Unix socket.
func dialEndpoint(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

//go:build windows
// +build windows

package csiproxy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"example.invalid/csi-proxy-rs/go/csiproxy"
)

// TestBench is a measuring mode, run by crates/csi-proxy/benches/pipes.rs
// beside the same calls over the pipe: with CSI_PROXY_BENCH=<calls> and
// CSI_PROXY_BENCH_KUBELET, _EXISTS, _OUTSIDE, _MKDIR it prints
// `bench <name> p50 <us> p99 <us>` lines in compat/go's -bench format for
// PathExists of an existing path, PathExists refused (outside the roots)
// and Mkdir+Rmdir, each call in-process through the DLL.
func TestBench(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("CSI_PROXY_BENCH"))
	if err != nil {
		t.Skip("a measuring mode: CSI_PROXY_BENCH=<calls> runs it")
	}
	h, err := csiproxy.Open(csiproxy.Options{DLL: os.Getenv("CSI_PROXY_DLL"), KubeletPath: os.Getenv("CSI_PROXY_BENCH_KUBELET")})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	fs := h.Filesystem()
	exists, outside := os.Getenv("CSI_PROXY_BENCH_EXISTS"), os.Getenv("CSI_PROXY_BENCH_OUTSIDE")
	dir := filepath.Join(os.Getenv("CSI_PROXY_BENCH_MKDIR"), "library")
	run := func(name string, call func() error) {
		lat := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			start := time.Now()
			if err := call(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			lat = append(lat, time.Since(start))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		at := func(q float64) float64 { return float64(lat[int(float64(len(lat))*q)].Nanoseconds()) / 1e3 }
		fmt.Printf("bench %s p50 %.1f p99 %.1f\n", name, at(0.50), at(0.99))
	}
	run("pathexists-existing", func() error {
		ok, err := fs.PathExists(exists)
		if err == nil && !ok {
			err = fmt.Errorf("%s does not exist", exists)
		}
		return err
	})
	run("pathexists-refused", func() error {
		if _, err := fs.PathExists(outside); csiproxy.CodeOf(err) != csiproxy.PermissionDenied {
			return fmt.Errorf("not refused: %v", err)
		}
		return nil
	})
	run("mkdir-rmdir", func() error {
		if err := fs.Mkdir(dir); err != nil {
			return err
		}
		return fs.Rmdir(dir, false)
	})
}

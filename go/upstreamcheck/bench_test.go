//go:build windows

package upstreamcheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"unsafe"

	"github.com/kubernetes-csi/csi-proxy/v2/pkg/filesystem"
	filesystemapi "github.com/kubernetes-csi/csi-proxy/v2/pkg/filesystem/hostapi"
)

// The clock: QueryPerformanceCounter. Go 1.19 (go/csiproxy's TestBench,
// built with Debian's Go) reads it for time.Now under wine; Go >= 1.25
// reads the shared user data's interrupt time, which wine 8 updates in
// coarse steps (most calls measure 0). Both modes thus use the same clock.
var (
	kernel32                  = syscall.NewLazyDLL("kernel32.dll")
	queryPerformanceCounter   = kernel32.NewProc("QueryPerformanceCounter")
	queryPerformanceFrequency = kernel32.NewProc("QueryPerformanceFrequency")
)

func ticks() int64 {
	var t int64
	queryPerformanceCounter.Call(uintptr(unsafe.Pointer(&t)))
	return t
}

// TestBenchUpstream is a measuring mode, run by
// crates/csi-proxy/benches/pipes/library.rs beside go/csiproxy's TestBench:
// the same calls in-process through upstream's own library, its
// pkg/filesystem front end over its default host API
// (filesystemapi.New(): os.Lstat, os.MkdirAll, os.Remove), with
// CSI_PROXY_BENCH=<calls> and CSI_PROXY_BENCH_EXISTS, _OUTSIDE, _MKDIR as
// TestBench has them. Upstream's library confines nothing, so the path
// outside the roots is answered, not refused: that line is
// `bench pathexists-outside`, and the answer is printed as a `note` line.
func TestBenchUpstream(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("CSI_PROXY_BENCH"))
	if err != nil {
		t.Skip("a measuring mode: CSI_PROXY_BENCH=<calls> runs it")
	}
	fs, err := filesystem.New(filesystemapi.New())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	exists, outside := os.Getenv("CSI_PROXY_BENCH_EXISTS"), os.Getenv("CSI_PROXY_BENCH_OUTSIDE")
	dir := filepath.Join(os.Getenv("CSI_PROXY_BENCH_MKDIR"), "upstream-library")
	var freq int64
	if r, _, err := queryPerformanceFrequency.Call(uintptr(unsafe.Pointer(&freq))); r == 0 {
		t.Fatal(err)
	}
	run := func(name string, call func() error) {
		lat := make([]int64, 0, n)
		for i := 0; i < n; i++ {
			start := ticks()
			if err := call(); err != nil {
				fmt.Printf("note %s does not answer: %v\n", name, err)
				return
			}
			lat = append(lat, ticks()-start)
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		at := func(q float64) float64 { return float64(lat[int(float64(len(lat))*q)]) * 1e6 / float64(freq) }
		fmt.Printf("bench %s p50 %.1f p99 %.1f\n", name, at(0.50), at(0.99))
	}
	run("pathexists-existing", func() error {
		r, err := fs.PathExists(ctx, &filesystem.PathExistsRequest{Path: exists})
		if err == nil && !r.Exists {
			err = fmt.Errorf("%s does not exist", exists)
		}
		return err
	})
	var answer *filesystem.PathExistsResponse
	run("pathexists-outside", func() error {
		answer, err = fs.PathExists(ctx, &filesystem.PathExistsRequest{Path: outside})
		return err
	})
	if answer != nil {
		fmt.Printf("note pathexists-outside answered exists=%v for %s (no confinement)\n", answer.Exists, outside)
	}
	run("mkdir-rmdir", func() error {
		if _, err := fs.Mkdir(ctx, &filesystem.MkdirRequest{Path: dir}); err != nil {
			return err
		}
		_, err := fs.Rmdir(ctx, &filesystem.RmdirRequest{Path: dir})
		return err
	})
}

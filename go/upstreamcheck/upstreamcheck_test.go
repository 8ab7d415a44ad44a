//go:build windows

package upstreamcheck

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"example.invalid/csi-proxy-rs/go/csiproxy"
	"example.invalid/csi-proxy-rs/go/internal/tempdir"

	"github.com/kubernetes-csi/csi-proxy/v2/pkg/disk"
	"github.com/kubernetes-csi/csi-proxy/v2/pkg/filesystem"
	"github.com/kubernetes-csi/csi-proxy/v2/pkg/system"
)

// Upstream's front ends over csi_proxy.dll (CSI_PROXY_DLL; check.sh runs
// this under wine): the calls reach our host, its refusals keep their code
// through upstream's front end, and upstream's conversions of our answers
// are the core's.
func TestFrontEndsOverTheDLL(t *testing.T) {
	dll := os.Getenv("CSI_PROXY_DLL")
	if dll == "" {
		t.Fatal("CSI_PROXY_DLL is not set (check.sh sets it)")
	}
	// Not t.TempDir: a newer Go's os.RemoveAll fails under wine 8.
	root := tempdir.New(t)
	kubelet, outside := filepath.Join(root, "kubelet"), filepath.Join(root, "outside")
	for _, d := range []string{kubelet, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h, err := csiproxy.Open(csiproxy.Options{DLL: dll, KubeletPath: kubelet})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := FrontEnds(h)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	dir := filepath.Join(kubelet, "pods", "a")
	if _, err := c.Filesystem.Mkdir(ctx, &filesystem.MkdirRequest{Path: dir}); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Filesystem.PathExists(ctx, &filesystem.PathExistsRequest{Path: dir}); err != nil || !r.Exists {
		t.Fatalf("PathExists(%s): %+v %v", dir, r, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("Mkdir through upstream's front end made no directory: %v", err)
	}
	if _, err := c.Filesystem.Rmdir(ctx, &filesystem.RmdirRequest{Path: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Rmdir through upstream's front end left %s: %v", dir, err)
	}
	// Upstream's front end lets a path outside the roots through its own
	// lexical check; our host refuses it, and the code survives.
	target := filepath.Join(outside, "made")
	for name, call := range map[string]func() error{
		"PathExists": func() error {
			_, err := c.Filesystem.PathExists(ctx, &filesystem.PathExistsRequest{Path: outside})
			return err
		},
		"Mkdir": func() error {
			_, err := c.Filesystem.Mkdir(ctx, &filesystem.MkdirRequest{Path: target})
			return err
		},
		"Rmdir": func() error {
			_, err := c.Filesystem.Rmdir(ctx, &filesystem.RmdirRequest{Path: outside, Force: true})
			return err
		},
	} {
		if err := call(); csiproxy.CodeOf(err) != csiproxy.PermissionDenied {
			t.Errorf("%s outside the roots through upstream's front end: %v, want PermissionDenied", name, err)
		}
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("%s was made outside the roots: %v", target, err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("%s was removed: %v", outside, err)
	}

	info, err := h.System().GetService("RpcSs")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := c.System.GetService(ctx, &system.GetServiceRequest{Name: "RpcSs"})
	if err != nil {
		t.Fatal(err)
	}
	if svc.DisplayName != info.DisplayName ||
		(svc.Status == system.SERVICE_STATUS_RUNNING) != (info.Status == "Running") ||
		(svc.StartType == system.START_TYPE_AUTOMATIC) != (info.StartType == "Auto") {
		t.Fatalf("GetService through upstream's front end %+v, core %+v", svc, info)
	}

	coreIDs, coreErr := h.Disk().ListDiskIDs()
	ids, err := c.Disk.ListDiskIDs(ctx, &disk.ListDiskIDsRequest{})
	if csiproxy.CodeOf(err) != csiproxy.CodeOf(coreErr) {
		t.Fatalf("ListDiskIDs through upstream's front end: %v, core %v", err, coreErr)
	}
	if err == nil {
		if len(ids.DiskIDs) != len(coreIDs) {
			t.Fatalf("ListDiskIDs: %d disks, core %d", len(ids.DiskIDs), len(coreIDs))
		}
		for n, v := range coreIDs {
			if got := ids.DiskIDs[n]; got == nil || got.Page83 != v.Page83 || got.SerialNumber != v.SerialNumber {
				t.Fatalf("disk %d: %+v, core %+v", n, got, v)
			}
		}
	}
}

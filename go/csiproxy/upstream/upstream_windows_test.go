//go:build windows
// +build windows

package upstream_test

import (
	"os"
	"reflect"
	"testing"

	"example.invalid/csi-proxy-rs/go/csiproxy"
	"example.invalid/csi-proxy-rs/go/csiproxy/upstream"
	"example.invalid/csi-proxy-rs/go/internal/tempdir"
)

// The adapters answer what the core answers, in upstream's types (against
// csi_proxy.dll under wine: go/test-windows.sh).
func TestAdaptersAnswerAsTheCore(t *testing.T) {
	h, err := csiproxy.Open(csiproxy.Options{DLL: os.Getenv("CSI_PROXY_DLL"), KubeletPath: tempdir.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	info, err := h.System().GetService("RpcSs")
	if err != nil {
		t.Fatal(err)
	}
	adapted, err := upstream.NewSystem[ServiceInfo](h.System()).GetService("RpcSs")
	if err != nil || *adapted != ServiceInfo(*info) {
		t.Fatalf("GetService: %+v %v, core %+v", adapted, err, info)
	}

	disk := upstream.NewDisk[DiskLocation, DiskIDs](h.Disk())
	coreIDs, coreErr := h.Disk().ListDiskIDs()
	ids, err := disk.ListDiskIDs()
	if csiproxy.CodeOf(err) != csiproxy.CodeOf(coreErr) || len(ids) != len(coreIDs) {
		t.Fatalf("ListDiskIDs: %v %v, core %v %v", ids, err, coreIDs, coreErr)
	}
	for n, v := range coreIDs {
		if ids[n] != DiskIDs(v) {
			t.Fatalf("disk %d: %+v, core %+v", n, ids[n], v)
		}
	}
	coreLocs, coreErr := h.Disk().ListDiskLocations()
	locs, err := disk.ListDiskLocations()
	if csiproxy.CodeOf(err) != csiproxy.CodeOf(coreErr) || len(locs) != len(coreLocs) {
		t.Fatalf("ListDiskLocations: %v %v, core %v %v", locs, err, coreLocs, coreErr)
	}

	iscsi := upstream.NewISCSI[TargetPortal](h.ISCSI())
	corePortals, coreErr := h.ISCSI().ListTargetPortals()
	portals, err := iscsi.ListTargetPortals()
	if csiproxy.CodeOf(err) != csiproxy.CodeOf(coreErr) || len(portals) != len(corePortals) {
		t.Fatalf("ListTargetPortals: %v %v, core %v %v", portals, err, corePortals, coreErr)
	}
	// A portal with no address is refused before anything is looked up,
	// through the adapter as through the core.
	err = iscsi.AddTargetPortal(&TargetPortal{Port: 3260})
	coreErr = h.ISCSI().AddTargetPortal(&csiproxy.TargetPortal{Port: 3260})
	if csiproxy.CodeOf(err) != csiproxy.InvalidArgument || !reflect.DeepEqual(err, coreErr) {
		t.Fatalf("AddTargetPortal without address: %v, core %v", err, coreErr)
	}
}

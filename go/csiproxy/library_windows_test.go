//go:build windows
// +build windows

package csiproxy_test

// Against csi_proxy.dll (CSI_PROXY_DLL; go/test-windows.sh builds it and
// runs this test under wine): every group's calls that wine can run, and
// hostile inputs refused with the pipe's codes.

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"example.invalid/csi-proxy-rs/go/csiproxy"
	"example.invalid/csi-proxy-rs/go/internal/tempdir"
)

// env is a kubelet directory, a directory outside it with a sentinel file,
// and a host over the kubelet directory.
type env struct {
	kubelet, outside string
	host             *csiproxy.Host
}

func open(t *testing.T) *env {
	t.Helper()
	dll := os.Getenv("CSI_PROXY_DLL")
	if dll == "" {
		t.Fatal("CSI_PROXY_DLL is not set (go/test-windows.sh sets it)")
	}
	root := tempdir.New(t)
	e := &env{kubelet: filepath.Join(root, "kubelet"), outside: filepath.Join(root, "outside")}
	for _, d := range []string{e.kubelet, e.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.outside, "sentinel"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := csiproxy.Open(csiproxy.Options{DLL: dll, KubeletPath: e.kubelet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	e.host = h
	return e
}

func (e *env) sentinelKept(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.outside, "sentinel"))
	if err != nil || string(b) != "keep" {
		t.Fatalf("the sentinel outside the roots changed: %q %v", b, err)
	}
}

func wantCode(t *testing.T, what string, err error, code csiproxy.Code) {
	t.Helper()
	if csiproxy.CodeOf(err) != code {
		t.Fatalf("%s: want %v, got %v", what, code, err)
	}
}

func TestBadOptionsAreInvalidArgument(t *testing.T) {
	_, err := csiproxy.Open(csiproxy.Options{DLL: os.Getenv("CSI_PROXY_DLL"), KubeletPath: "relative"})
	wantCode(t, "relative kubelet path", err, csiproxy.InvalidArgument)
	_, err = csiproxy.Open(csiproxy.Options{DLL: os.Getenv("CSI_PROXY_DLL")})
	wantCode(t, "no roots", err, csiproxy.InvalidArgument)
}

func TestFilesystemLifeCycle(t *testing.T) {
	e := open(t)
	fs := e.host.Filesystem()
	dir := filepath.Join(e.kubelet, "pods", "uid", "volumes", "pvc")
	if ok, err := fs.PathExists(dir); err != nil || ok {
		t.Fatalf("PathExists before Mkdir: %v %v", ok, err)
	}
	if ok, err := fs.PathValid(dir); err != nil || ok {
		t.Fatalf("PathValid before Mkdir: %v %v", ok, err)
	}
	if err := fs.Mkdir(dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("Mkdir made no directory: %v", err)
	}
	for _, f := range []func(string) (bool, error){fs.PathExists, fs.PathValid} {
		if ok, err := f(dir); err != nil || !ok {
			t.Fatalf("after Mkdir: %v %v", ok, err)
		}
	}
	if ok, err := fs.IsSymlink(dir); err != nil || ok {
		t.Fatalf("IsSymlink of a directory: %v %v", ok, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fs.RmdirContents(dir); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("RmdirContents left %v", left)
	}
	if err := fs.Rmdir(dir, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Rmdir left the directory: %v", err)
	}
	wantCode(t, "IsSymlink of nothing", func() error { _, err := fs.IsSymlink(dir); return err }(), csiproxy.NotFound)
	if err := fs.Rmdir(filepath.Join(e.kubelet, "pods"), true); err != nil {
		t.Fatal(err)
	}
}

// The codes the pipe tier asserts for the same inputs.
func TestHostileInputsAreRefusedAsOverThePipe(t *testing.T) {
	e := open(t)
	fs := e.host.Filesystem()
	k, o := e.kubelet, e.outside
	paths := []struct {
		path string
		code csiproxy.Code
	}{
		{"", csiproxy.InvalidArgument},
		{`relative\path`, csiproxy.InvalidArgument},
		{k + `\..\outside\sentinel`, csiproxy.InvalidArgument},
		{k + `\a\..\..\outside`, csiproxy.InvalidArgument},
		{k + "X\\x", csiproxy.PermissionDenied},
		{o + `\sentinel`, csiproxy.PermissionDenied},
		{`C:\Windows`, csiproxy.PermissionDenied},
		{k + "\\a\x00b", csiproxy.InvalidArgument},
		{`\\?\` + k + `\x`, csiproxy.InvalidArgument},
		{k + `\` + strings.Repeat("a", 300), csiproxy.InvalidArgument},
	}
	for _, p := range paths {
		wantCode(t, "Mkdir "+p.path, fs.Mkdir(p.path), p.code)
		wantCode(t, "Rmdir "+p.path, fs.Rmdir(p.path, true), p.code)
		wantCode(t, "RmdirContents "+p.path, fs.RmdirContents(p.path), p.code)
		_, err := fs.PathValid(p.path)
		wantCode(t, "PathValid "+p.path, err, p.code)
		wantCode(t, "CreateSymlink to "+p.path, fs.CreateSymlink(k, p.path), p.code)
	}
	// Removing or emptying the kubelet directory itself.
	wantCode(t, "Rmdir root", fs.Rmdir(k, true), csiproxy.PermissionDenied)
	wantCode(t, "RmdirContents root", fs.RmdirContents(k), csiproxy.PermissionDenied)
	// Service names and volume ids that are not ones.
	sys := e.host.System()
	for _, name := range []string{"", `a\b`, "a/b", strings.Repeat("s", 300)} {
		_, err := sys.GetService(name)
		wantCode(t, "GetService "+name, err, csiproxy.InvalidArgument)
	}
	vol := e.host.Volume()
	for _, id := range []string{"", `C:\`, `\\.\PhysicalDrive0`, `\\?\Volume{' OR 1=1 --}\`} {
		_, err := vol.IsVolumeFormatted(id)
		wantCode(t, "IsVolumeFormatted "+id, err, csiproxy.InvalidArgument)
	}
	wantCode(t, "ConnectTarget auth", e.host.ISCSI().ConnectTarget(&csiproxy.TargetPortal{Address: "10.0.0.1", Port: 3260}, "iqn", "BOGUS", "", ""), csiproxy.InvalidArgument)
	wantCode(t, "NewSMBLink no local path", e.host.SMB().NewSMBLink(`\\server\share`, ""), csiproxy.InvalidArgument)
	wantCode(t, "NewSMBLink outside", e.host.SMB().NewSMBLink(`\\server\share`, o+`\link`), csiproxy.PermissionDenied)
	e.sentinelKept(t)
}

func TestVolumeReads(t *testing.T) {
	e := open(t)
	vol := e.host.Volume()
	id, err := vol.GetClosestVolumeIDFromTargetPath(e.kubelet)
	if err != nil || !strings.HasPrefix(id, `\\?\Volume{`) {
		t.Fatalf("GetClosestVolumeIDFromTargetPath: %q %v", id, err)
	}
	total, used, err := vol.GetVolumeStats(id)
	if err != nil || total <= 0 || used < 0 || used > total {
		t.Fatalf("GetVolumeStats %s: %d %d %v", id, total, used, err)
	}
	if ok, err := vol.IsVolumeFormatted(id); err != nil || !ok {
		t.Fatalf("IsVolumeFormatted %s: %v %v", id, ok, err)
	}
	disk, err := vol.GetDiskNumberFromVolumeID(id)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := vol.ListVolumesOnDisk(disk, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range ids {
		found = found || v == id
	}
	if !found {
		t.Fatalf("ListVolumesOnDisk %d = %v lacks %s", disk, ids, id)
	}
	if size, err := e.host.Disk().GetDiskStats(disk); err != nil || size <= 0 {
		t.Fatalf("GetDiskStats %d: %d %v", disk, size, err)
	}
	_, err = vol.GetVolumeIDFromTargetPath(e.kubelet)
	wantCode(t, "GetVolumeIDFromTargetPath of a plain directory", err, csiproxy.NotFound)
	_, err = e.host.Disk().GetDiskStats(4000)
	wantCode(t, "GetDiskStats 4000", err, csiproxy.NotFound)
}

func TestSystemServicesAndBIOSSerial(t *testing.T) {
	e := open(t)
	sys := e.host.System()
	serial, err := sys.GetBIOSSerialNumber()
	if err != nil || strings.TrimSpace(serial) != serial || strings.ContainsRune(serial, 0) {
		t.Fatalf("GetBIOSSerialNumber: %q %v", serial, err)
	}
	again, _ := sys.GetBIOSSerialNumber()
	if again != serial {
		t.Fatalf("the serial changed: %q %q", serial, again)
	}
	// RPCSS runs in every Windows (and wine) system.
	info, err := sys.GetService("RpcSs")
	if err != nil || info.DisplayName == "" || info.Status == "Unknown" || info.StartType == "Unknown" {
		t.Fatalf("GetService RpcSs: %+v %v", info, err)
	}
	_, err = sys.GetService("no-such-service-csi-proxy")
	wantCode(t, "GetService of nothing", err, csiproxy.NotFound)
}

// A goroutine swaps the directory being emptied or removed for a link
// leading outside the roots, as fast as it can, while the calls run:
// nothing outside the roots may change.
func TestRacingTheKubeletDirChangesNothingOutside(t *testing.T) {
	e := open(t)
	fs := e.host.Filesystem()
	victim := filepath.Join(e.kubelet, "victim")
	fresh, old := filepath.Join(e.kubelet, "fresh"), filepath.Join(e.kubelet, "old")
	probe := filepath.Join(e.kubelet, "probe")
	err := os.Symlink(e.outside, probe)
	links := err == nil
	if !links {
		t.Logf("SKIPPED (needs real Windows): directory symbolic links (%v); the race swaps plain directories only", err)
	}
	os.Remove(probe)
	isDir := func(p string) bool {
		fi, err := os.Lstat(p)
		return err == nil && fi.IsDir() && fi.Mode()&os.ModeSymlink == 0
	}
	var stop int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Written only under fresh (never a link); victim is a directory
		// renamed into place, then moved away and replaced by a link.
		for atomic.LoadInt32(&stop) == 0 {
			os.MkdirAll(filepath.Join(fresh, "sub"), 0o755)
			os.WriteFile(filepath.Join(fresh, "sub", "f"), []byte("x"), 0o644)
			os.Rename(fresh, victim)
			if isDir(victim) && os.Rename(victim, old) == nil && links {
				os.Symlink(e.outside, victim)
				os.Remove(victim)
			}
			if isDir(old) {
				// Not os.RemoveAll, which a newer Go runs with calls
				// wine 8 lacks: old would stay and block the renames.
				tempdir.RemoveTree(old)
			}
		}
	}()
	calls := 0
	for i := 0; i < 300; i++ {
		fs.RmdirContents(victim)
		fs.Rmdir(victim, true)
		fs.Rmdir(victim, false)
		calls += 3
	}
	atomic.StoreInt32(&stop, 1)
	wg.Wait()
	e.sentinelKept(t)
	if left, err := os.ReadDir(e.outside); err != nil || len(left) != 1 {
		t.Fatalf("outside the roots now holds %v (%v)", left, err)
	}
	t.Logf("%d calls raced a goroutine swapping %s (links: %v)", calls, victim, links)
}

func TestConcurrentCallsShareOneHost(t *testing.T) {
	e := open(t)
	fs := e.host.Filesystem()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				p := filepath.Join(e.kubelet, "c", string(rune('a'+g)), string(rune('a'+i)))
				if err := fs.Mkdir(p); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := 0
	filepath.WalkDir(filepath.Join(e.kubelet, "c"), func(_ string, d os.DirEntry, _ error) error {
		if d != nil && d.IsDir() {
			n++
		}
		return nil
	})
	if n != 1+8+160 {
		t.Fatalf("%d directories", n)
	}
}

//go:build windows
// +build windows

package csiproxy_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"example.invalid/csi-proxy-rs/go/csiproxy"
)

// hostLn is wine's view of the host's ln (drive Z: is the host's /).
const hostLn = `Z:\bin\ln`

// hostRun starts the host's program (Z:\bin\<name>) in dir and waits
// until done() holds: wine starts a Unix program but gives no process to
// wait for (os/exec would look for <name>.exe).
func hostRun(t *testing.T, dir string, done func() bool, argv ...string) {
	t.Helper()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	attr := &os.ProcAttr{Dir: dir, Files: []*os.File{null, null, null}}
	if p, err := os.StartProcess(`Z:\bin\`+argv[0], argv, attr); err == nil {
		p.Release()
	}
	for start := time.Now(); !done(); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%v in %s: not done", argv, dir)
		}
	}
}

// hostSymlink makes the host (Unix) symlink dir\name storing target
// (relative, Unix separators), removed again when the test ends (Go's
// RemoveAll cannot: to wine it is what it leads to). Skips the test where
// there is no such host (real Windows, where links are reparse points and
// the Rust real-Windows tier plants them).
func hostSymlink(t *testing.T, dir, name, target string) {
	t.Helper()
	if _, err := os.Stat(hostLn); err != nil {
		t.Skipf("needs wine (host symlinks): %v", err)
	}
	exists := func() bool { _, err := os.Lstat(filepath.Join(dir, name)); return err == nil }
	hostRun(t, dir, exists, "ln", "-s", target, name)
	t.Cleanup(func() { hostRun(t, dir, func() bool { return !exists() }, "rm", name) })
}

// The library mode a driver author meets under wine: a host symlink as
// the last component of a path below the kubelet dir, leading to a
// directory (or a file) outside it. Wine shows it as what it leads to; every
// call that acts on it is refused and the tree outside stays as it was.
func TestAHostSymlinkAtTheLastComponentIsNeverActedThrough(t *testing.T) {
	e := open(t)
	fsys := e.host.Filesystem()
	dir := filepath.Join(e.kubelet, "pods", "uid")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(e.outside, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.outside, "sub", "f"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	// outside is three levels up from dir: kubelet\pods\uid.
	hostSymlink(t, dir, "dlink", "../../../outside")
	hostSymlink(t, dir, "flink", "../../../outside/sentinel")
	kept := func(after string) {
		t.Helper()
		e.sentinelKept(t)
		if b, err := os.ReadFile(filepath.Join(e.outside, "sub", "f")); err != nil || string(b) != "keep" {
			t.Fatalf("after %s: outside\\sub\\f changed: %q %v", after, b, err)
		}
	}
	for _, name := range []string{"dlink", "flink"} {
		link := filepath.Join(dir, name)
		calls := map[string]error{
			"RmdirContents": fsys.RmdirContents(link),
			"Rmdir":         fsys.Rmdir(link, false),
			"Rmdir force":   fsys.Rmdir(link, true),
			"Mkdir":         fsys.Mkdir(link),
		}
		_, calls["IsSymlink"] = fsys.IsSymlink(link)
		_, calls["PathExists"] = fsys.PathExists(link)
		_, calls["PathValid"] = fsys.PathValid(link)
		_, calls["GetVolumeIDFromTargetPath"] = e.host.Volume().GetVolumeIDFromTargetPath(link)
		for call, err := range calls {
			code := csiproxy.CodeOf(err)
			// A directory call on a link to a file: "not a directory",
			// found before anything is touched.
			notDir := name == "flink" && (code == csiproxy.FailedPrecondition || code == csiproxy.AlreadyExists)
			if code != csiproxy.PermissionDenied && !notDir {
				t.Errorf("%s %s: want PermissionDenied, got %v", call, name, err)
			}
			kept(call + " " + name)
		}
		if _, err := os.Lstat(link); err != nil {
			t.Fatalf("the link %s itself is gone: %v", name, err)
		}
	}
}

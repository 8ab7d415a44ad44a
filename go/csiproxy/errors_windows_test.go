//go:build windows
// +build windows

package csiproxy_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"example.invalid/csi-proxy-rs/go/csiproxy"
)

// fsMatches is what driver code can ask of an error: errors.Is and the
// older os.Is* (which only see an *fs.PathError, *os.LinkError or
// *os.SyscallError around a syscall.Errno).
type fsMatches struct {
	isNotExist, isExist, isPermission bool // errors.Is(err, fs.Err*)
	osNotExist, osExist, osPermission bool // os.Is*(err)
}

func matchesOf(err error) fsMatches {
	return fsMatches{
		errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrExist), errors.Is(err, fs.ErrPermission),
		os.IsNotExist(err), os.IsExist(err), os.IsPermission(err),
	}
}

// The Filesystem calls that upstream's library host answers with an os
// error, against the DLL. Upstream's front ends (pkg/filesystem) hand the
// host's error back unchanged, and its host (pkg/filesystem/hostapi) makes
// one os call per method: os.Lstat (IsSymlink, via its utils), os.Remove
// (Rmdir), os.RemoveAll (Rmdir with force), os.Open (RmdirContents),
// os.MkdirAll (Mkdir). Each case runs that os call on the same path, in the
// same state, beside ours: errors.Is(err, fs.ErrNotExist) and
// os.IsNotExist (and the same for fs.ErrExist, fs.ErrPermission) must give
// the same answers for both, and for ours errors.Is must agree with os.Is*,
// except where the two hosts classify the condition differently (listed,
// with why; there only ours is checked).
func TestFilesystemErrorsMatchUpstreamsOsErrors(t *testing.T) {
	e := open(t)
	fsys := e.host.Filesystem()
	k := e.kubelet
	if err := os.MkdirAll(filepath.Join(k, "full", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(k, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(k, "missing")
	deep := filepath.Join(k, "missing", "deeper")
	cases := []struct {
		name      string
		ours      func() error
		upstreams func() error
		// differs: the hosts classify the condition differently, and why
		// (then only ours is checked, for errors.Is against os.Is*).
		differs string
	}{
		{"IsSymlink of nothing", func() error { _, err := fsys.IsSymlink(missing); return err },
			func() error { _, err := os.Lstat(missing); return err }, ""},
		{"IsSymlink below nothing", func() error { _, err := fsys.IsSymlink(deep); return err },
			func() error { _, err := os.Lstat(deep); return err }, ""},
		{"Rmdir of nothing", func() error { return fsys.Rmdir(missing, false) },
			func() error { return os.Remove(missing) }, ""},
		{"Rmdir below nothing", func() error { return fsys.Rmdir(deep, false) },
			func() error { return os.Remove(deep) }, ""},
		{"Rmdir force of nothing", func() error { return fsys.Rmdir(missing, true) },
			func() error { return os.RemoveAll(missing) }, ""},
		{"RmdirContents of nothing", func() error { return fsys.RmdirContents(missing) },
			func() error { f, err := os.Open(missing); f.Close(); return err }, ""},
		{"RmdirContents below nothing", func() error { return fsys.RmdirContents(deep) },
			func() error { f, err := os.Open(deep); f.Close(); return err }, ""},
		{"Mkdir of an existing directory", func() error { return fsys.Mkdir(filepath.Join(k, "full")) },
			func() error { return os.MkdirAll(filepath.Join(k, "full"), 0o755) }, ""},
		{"Mkdir over a file", func() error { return fsys.Mkdir(filepath.Join(k, "file")) },
			func() error { return os.MkdirAll(filepath.Join(k, "file"), 0o755) },
			"ours AlreadyExists (something else is there); Go's os.MkdirAll says ENOTDIR (no fs error) on Windows, ERROR_PATH_NOT_FOUND under wine"},
		{"Mkdir below a file", func() error { return fsys.Mkdir(filepath.Join(k, "file", "x")) },
			func() error { return os.MkdirAll(filepath.Join(k, "file", "x"), 0o755) },
			"as over a file"},
		{"Rmdir of a full directory", func() error { return fsys.Rmdir(filepath.Join(k, "full"), false) },
			func() error { return os.Remove(filepath.Join(k, "full")) },
			"ours FailedPrecondition; Windows' ERROR_DIR_NOT_EMPTY is fs.ErrExist to Go"},
	}
	for _, c := range cases {
		ours, theirs := c.ours(), c.upstreams()
		o, u := matchesOf(ours), matchesOf(theirs)
		if o.isNotExist != o.osNotExist || o.isExist != o.osExist || o.isPermission != o.osPermission {
			t.Errorf("%s: errors.Is and os.Is* disagree on ours: %+v (%v)", c.name, o, ours)
		}
		if c.differs != "" {
			t.Logf("%s: %s: ours %+v (%v), upstream's %+v (%v)", c.name, c.differs, o, ours, u, theirs)
			if ours == nil || o == u {
				t.Errorf("%s: listed as differing (%s) but both %+v", c.name, c.differs, o)
			}
			continue
		}
		if o != u || (ours == nil) != (theirs == nil) {
			t.Errorf("%s: ours %+v (%v), upstream's %+v (%v)", c.name, o, ours, u, theirs)
		}
	}
	// Refusals keep their code and message, and PermissionDenied is
	// os.IsPermission as upstream's host's ERROR_ACCESS_DENIED would be.
	err := fsys.Rmdir(filepath.Join(e.outside, "sentinel"), false)
	if csiproxy.CodeOf(err) != csiproxy.PermissionDenied || !os.IsPermission(err) || !errors.Is(err, os.ErrPermission) {
		t.Fatalf("outside the roots: %v", err)
	}
	err = fsys.Mkdir("relative")
	var ce *csiproxy.Error
	if !errors.As(err, &ce) || ce.Code() != csiproxy.InvalidArgument || os.IsNotExist(err) {
		t.Fatalf("a relative path: %T %v", err, err)
	}
	e.sentinelKept(t)
}

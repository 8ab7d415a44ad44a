// Package tempdir gives tests a temporary directory whose clean-up is a walk
// of its own: os.Remove of every entry, deepest first, never following a
// link. t.TempDir's clean-up is os.RemoveAll, which in newer Go versions
// removes through calls wine 8 does not implement ("unlinkat ...: Invalid
// function"), so a test built by such a Go would fail under wine. A path
// left behind fails the test with its name and the reason.
package tempdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TB is the part of testing.TB that New uses.
type TB interface {
	Helper()
	Name() string
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// New makes a new directory under os.TempDir and removes it with RemoveTree
// when the test and its subtests end, after the clean-ups registered later
// (a host over the directory is closed first). A failure is t.Errorf.
func New(t TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern(t.Name()))
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	t.Cleanup(func() {
		if err := RemoveTree(dir); err != nil {
			t.Errorf("temp dir clean-up: %v", err)
		}
	})
	return dir
}

// pattern is the test's name reduced to characters safe in a file name.
func pattern(name string) string {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, name)
	if len(clean) > 64 {
		clean = clean[:64]
	}
	return clean + "-*"
}

// remove is os.Remove, replaced by the package's test to make it fail.
var remove = os.Remove

// RemoveTree removes root and everything beneath it: the tree is walked
// first (links are removed, never followed), then every path is removed,
// children before their directory. It goes on past failures and reports
// how many paths are left and the first reason; what is already gone is
// not a failure.
func RemoveTree(root string) error {
	var paths []string
	var errs []error
	_ = filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		// A directory that cannot be read comes a second time, with err.
		if err == nil {
			paths = append(paths, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		return nil
	})
	left := 0
	for i := len(paths) - 1; i >= 0; i-- {
		if err := remove(paths[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			left++
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %d of %d paths not removed, %d errors; first: %w", root, left, len(paths), len(errs), errs[0])
}

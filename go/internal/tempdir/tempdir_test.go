package tempdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTB records what New reports and runs its clean-ups on demand.
type fakeTB struct {
	name     string
	cleanups []func()
	errors   []string
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Name() string              { return f.name }
func (f *fakeTB) Cleanup(fn func())         { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(s string, a ...any) { f.errors = append(f.errors, fmt.Sprintf(s, a...)) }
func (f *fakeTB) Fatalf(s string, a ...any) { panic(fmt.Sprintf(s, a...)) }

func (f *fakeTB) cleanUp() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A tree of directories, files and links is removed; what a link leads to,
// outside the tree, is kept.
func TestCleanUpRemovesTheTreeNotWhatLinksLeadTo(t *testing.T) {
	outside, err := os.MkdirTemp("", "tempdir-outside-*")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := RemoveTree(outside); err != nil {
			t.Error(err)
		}
	}()
	write(t, filepath.Join(outside, "sentinel"), "keep")

	f := &fakeTB{name: "TestX/sub case:1"}
	dir := New(f)
	if base := filepath.Base(dir); !strings.HasPrefix(base, "TestX_sub_case_1-") {
		t.Fatalf("temp dir name %q", base)
	}
	write(t, filepath.Join(dir, "a", "b", "c", "file"), "x")
	write(t, filepath.Join(dir, "a", "other"), "y")
	if err := os.MkdirAll(filepath.Join(dir, "empty", "dirs"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Windows without the privilege to make links: the rest still runs.
	if err := os.Symlink(outside, filepath.Join(dir, "a", "link")); err != nil {
		t.Logf("no link in the tree: %v", err)
	}
	f.cleanUp()
	if len(f.errors) != 0 {
		t.Fatalf("clean-up reported %q", f.errors)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is still there: %v", dir, err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "sentinel")); err != nil || string(b) != "keep" {
		t.Fatalf("the link's target changed: %q %v", b, err)
	}
}

// A path that cannot be removed fails the test with its name and why; the
// rest is still removed. A tree already gone is no failure.
func TestCleanUpFailureIsReported(t *testing.T) {
	f := &fakeTB{name: "TestY"}
	dir := New(f)
	stuck := filepath.Join(dir, "a", "stuck")
	write(t, stuck, "x")
	write(t, filepath.Join(dir, "b", "free"), "y")
	defer func() { remove = os.Remove }()
	remove = func(p string) error {
		if p == stuck {
			return &os.PathError{Op: "remove", Path: p, Err: errors.New("refused by the test")}
		}
		return os.Remove(p)
	}
	f.cleanUp()
	if len(f.errors) != 1 {
		t.Fatalf("want one failure, got %q", f.errors)
	}
	// stuck, its directory a and the root stay.
	want := "temp dir clean-up: " + dir + ": 3 of 5 paths not removed, 3 errors; first: remove " + stuck + ": refused by the test"
	if f.errors[0] != want {
		t.Fatalf("reported\n%s\nwant\n%s", f.errors[0], want)
	}
	if _, err := os.Lstat(filepath.Join(dir, "b")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the rest of the tree is still there: %v", err)
	}
	remove = os.Remove
	if err := RemoveTree(dir); err != nil {
		t.Fatal(err)
	}
	if err := RemoveTree(dir); err != nil {
		t.Fatalf("a tree already gone: %v", err)
	}
}

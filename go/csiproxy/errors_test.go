package csiproxy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
)

// The three codes match Go's fs errors through errors.Is, and a
// Filesystem call's *fs.PathError also through os.IsNotExist, os.IsExist
// and os.IsPermission (which look for a syscall.Errno, not for Is).
func TestErrorsMatchGoFsErrors(t *testing.T) {
	matches := func(err error) [6]bool {
		return [6]bool{
			errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrExist), errors.Is(err, fs.ErrPermission),
			os.IsNotExist(err), os.IsExist(err), os.IsPermission(err),
		}
	}
	for _, c := range []struct {
		code Code
		want [3]bool
	}{
		{NotFound, [3]bool{true, false, false}},
		{AlreadyExists, [3]bool{false, true, false}},
		{PermissionDenied, [3]bool{false, false, true}},
		{InvalidArgument, [3]bool{}},
		{FailedPrecondition, [3]bool{}},
		{Internal, [3]bool{}},
	} {
		var plain error = &Error{c.code, "m"}
		got := matches(plain)
		if [3]bool{got[0], got[1], got[2]} != c.want || got[3] || got[4] || got[5] {
			t.Errorf("%v as *Error: %v", c.code, got)
		}
		// Wrapped by a driver: still the code and the same matches.
		wrapped := fmt.Errorf("publishing: %w", plain)
		if CodeOf(wrapped) != c.code || errors.Is(wrapped, fs.ErrNotExist) != c.want[0] {
			t.Errorf("%v wrapped: %v", c.code, CodeOf(wrapped))
		}
		pe := pathError("Rmdir", "/k/x", plain)
		got = matches(pe)
		want := [6]bool{c.want[0], c.want[1], c.want[2], c.want[0], c.want[1], c.want[2]}
		if got != want {
			t.Errorf("%v from a Filesystem call: %v, want %v", c.code, got, want)
		}
		if CodeOf(pe) != c.code || CodeOf(fmt.Errorf("x: %w", pe)) != c.code {
			t.Errorf("%v from a Filesystem call: CodeOf %v", c.code, CodeOf(pe))
		}
		if _, isPath := pe.(*fs.PathError); isPath != (c.want != [3]bool{}) {
			t.Errorf("%v from a Filesystem call is %T", c.code, pe)
		}
	}
	pe := pathError("Rmdir", "/k/x", &Error{NotFound, `path "/k/x" does not exist`})
	if got := pe.Error(); got != `csi-proxy Rmdir (NotFound: path "/k/x" does not exist) /k/x: `+errnos[NotFound].Error() {
		t.Fatal(got)
	}
	// Another package's os error is not taken for ours.
	if CodeOf(&fs.PathError{Op: "remove", Path: "/k/x", Err: errnos[NotFound]}) != Unknown {
		t.Fatal("an os error taken for a csi-proxy one")
	}
	if pathError("Rmdir", "/k", nil) != nil || pathError("Rmdir", "/k", ErrUnsupported) != ErrUnsupported {
		t.Fatal("nil or a foreign error changed")
	}
}

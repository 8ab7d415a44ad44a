package csiproxy

import (
	"bytes"
	"testing"
)

// Encodings checked against what protobuf writes for the same messages
// (bytes from prost, the library's own codec).
func TestEncoderWritesProto3(t *testing.T) {
	var e encoder
	e.str(1, `C:\var\lib\kubelet\x`)
	e.boolean(2, true)
	want := append([]byte{0x0a, 20}, `C:\var\lib\kubelet\x`...)
	want = append(want, 0x10, 0x01)
	if !bytes.Equal(e, want) {
		t.Fatalf("RmdirRequest: % x", []byte(e))
	}
	var z encoder
	z.str(1, "")
	z.boolean(2, false)
	z.uint(3, 0)
	if len(z) != 0 {
		t.Fatalf("zero values must be left out: % x", []byte(z))
	}
	var n encoder
	n.int64(2, -1)
	if !bytes.Equal(n, []byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}) {
		t.Fatalf("int64 -1: % x", []byte(n))
	}
}

func TestDecoderReadsMapsRepeatedAndSkipsUnknown(t *testing.T) {
	// ListDiskIDsResponse{diskIDs: {7: {page83: "p", serial_number: "s"}}}
	// with an unknown fixed64 field 9 before it.
	var ids, entry, resp encoder
	ids.str(1, "p")
	ids.str(2, "s")
	entry.uint(1, 7)
	entry.message(2, ids)
	resp = append(resp, 0x49, 1, 2, 3, 4, 5, 6, 7, 8)
	resp.message(1, entry)
	m, err := decode(resp)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint32]DiskIDs{}
	if err := entries(m, 1, func(n uint32, v message) { got[n] = DiskIDs{v.str(1), v.str(2)} }); err != nil {
		t.Fatal(err)
	}
	if got[7] != (DiskIDs{"p", "s"}) || len(got) != 1 {
		t.Fatalf("%v", got)
	}
	for _, bad := range [][]byte{{0x0a, 5, 'a'}, {0x08}, {0x0b}, {0x00, 0x01}} {
		if _, err := decode(bad); err == nil {
			t.Fatalf("% x decoded", bad)
		}
	}
}

func TestErrorsCarryTheCode(t *testing.T) {
	var err error = &Error{PermissionDenied, "outside the roots"}
	if CodeOf(err) != PermissionDenied || CodeOf(nil) != OK || err.(*Error).Code() != 7 {
		t.Fatal(err)
	}
	if err.Error() != "csi-proxy: PermissionDenied: outside the roots" {
		t.Fatal(err.Error())
	}
}

func TestWipeZeroesTheRequest(t *testing.T) {
	var e encoder
	e.str(4, "hunter2")
	e.wipe()
	if len(e) != 9 || !bytes.Equal(e, make([]byte, 9)) {
		t.Fatalf("% x", []byte(e))
	}
}

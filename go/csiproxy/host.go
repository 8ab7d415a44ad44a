// Package csiproxy is csi-proxy's library mode for Go drivers: the host
// operations of csi_proxy.dll, called in-process (no pipe), without cgo.
//
// One type per API group (Filesystem, Volume, Disk, SMB, ISCSI, System)
// has the method set of kubernetes-csi/csi-proxy's library host API
// (`pkg/<group>/hostapi.HostAPI` on its library-development branch), with
// this package's own DiskLocation, DiskIDs, TargetPortal and ServiceInfo
// types. Every call runs through csi-proxy's own dispatch: the same path
// confinement, validation and error codes as over the pipe; a refusal is an
// *Error carrying the gRPC code (errors.Is matches fs.ErrNotExist, fs.ErrExist
// and fs.ErrPermission), or, from a Filesystem call, an *fs.PathError that
// os.IsNotExist and friends see too (CodeOf gives the code of both).
//
// Windows only: the DLL is loaded with syscall.LazyDLL. On other systems
// Open answers ErrUnsupported (plain Go cannot load a shared library without
// cgo); use csi-proxy's Unix sockets there.
package csiproxy

import "errors"

// ABIVersion is the version of csi_proxy.h this package was written for.
const ABIVersion = 1

// ErrUnsupported is Open's answer where the library cannot be loaded.
var ErrUnsupported = errors.New("csiproxy: library mode needs Windows (csi_proxy.dll); Go cannot load a shared library without cgo elsewhere")

// Options are the host's options: the csi-proxy binary's flags of the same
// names.
type Options struct {
	// DLL is the path of csi_proxy.dll ("": csi_proxy.dll on the DLL
	// search path).
	DLL string
	// KubeletPath is -kubelet-path: the first allowed root.
	KubeletPath string
	// WorkingDirs are -working-dir: more allowed roots.
	WorkingDirs []string
	// VolumeFsType is -volume-fs-type (Linux only; "": ext4).
	VolumeFsType string
	// AllowedServices is -allowed-services (empty: the OS's default list,
	// MSiSCSI on Windows; "*": every service).
	AllowedServices []string
	// ProtectedServices is -protected-services.
	ProtectedServices []string
	// UnprotectedServices is -unprotect-services.
	UnprotectedServices []string
	// ServiceName is -service-name: protected with its dependencies.
	ServiceName string
	// NoPrivacy is -require-privacy=false.
	NoPrivacy bool
}

// Host is one host of the library; safe for concurrent use. Close it when
// done.
type Host struct {
	lib    *library
	handle uintptr
}

// call runs method of group with the encoded request; the encoded response
// or an *Error.
func (h *Host) call(group, method string, req encoder) (message, error) {
	body, err := h.lib.call(h.handle, group, method, req)
	if err != nil {
		return nil, err
	}
	return decode(body)
}

// Filesystem is the Filesystem group.
func (h *Host) Filesystem() *Filesystem { return &Filesystem{h} }

// Volume is the Volume group.
func (h *Host) Volume() *Volume { return &Volume{h} }

// Disk is the Disk group.
func (h *Host) Disk() *Disk { return &Disk{h} }

// SMB is the SMB group.
func (h *Host) SMB() *SMB { return &SMB{h} }

// ISCSI is the iSCSI group.
func (h *Host) ISCSI() *ISCSI { return &ISCSI{h} }

// System is the System group.
func (h *Host) System() *System { return &System{h} }

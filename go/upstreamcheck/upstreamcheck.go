//go:build windows

// Package upstreamcheck compiles go/csiproxy against kubernetes-csi/csi-proxy's
// real library module (branch library-development,
// github.com/kubernetes-csi/csi-proxy/v2), which this repository never
// imports elsewhere: check.sh builds it offline from a checkout of upstream.
//
// The compile-time assertions below prove that csiproxy's group types, and
// the adapters of csiproxy/upstream instantiated with upstream's own
// hostapi types, are values of upstream's pkg/<group>/hostapi.HostAPI
// interfaces; FrontEnds proves that upstream's pkg/<group> constructors
// take them.
package upstreamcheck

import (
	"example.invalid/csi-proxy-rs/go/csiproxy"
	"example.invalid/csi-proxy-rs/go/csiproxy/upstream"

	"github.com/kubernetes-csi/csi-proxy/v2/pkg/disk"
	diskapi "github.com/kubernetes-csi/csi-proxy/v2/pkg/disk/hostapi"
	"github.com/kubernetes-csi/csi-proxy/v2/pkg/filesystem"
	filesystemapi "github.com/kubernetes-csi/csi-proxy/v2/pkg/filesystem/hostapi"
	"github.com/kubernetes-csi/csi-proxy/v2/pkg/iscsi"
	iscsiapi "github.com/kubernetes-csi/csi-proxy/v2/pkg/iscsi/hostapi"
	"github.com/kubernetes-csi/csi-proxy/v2/pkg/smb"
	smbapi "github.com/kubernetes-csi/csi-proxy/v2/pkg/smb/hostapi"
	"github.com/kubernetes-csi/csi-proxy/v2/pkg/system"
	systemapi "github.com/kubernetes-csi/csi-proxy/v2/pkg/system/hostapi"
	"github.com/kubernetes-csi/csi-proxy/v2/pkg/volume"
	volumeapi "github.com/kubernetes-csi/csi-proxy/v2/pkg/volume/hostapi"
)

// Upstream's own interfaces, each group.
var (
	_ filesystemapi.HostAPI = (*csiproxy.Filesystem)(nil)
	_ volumeapi.HostAPI     = (*csiproxy.Volume)(nil)
	_ smbapi.HostAPI        = (*csiproxy.SMB)(nil)
	_ diskapi.HostAPI       = upstream.Disk[diskapi.DiskLocation, diskapi.DiskIDs]{}
	_ iscsiapi.HostAPI      = upstream.ISCSI[iscsiapi.TargetPortal]{}
	_ systemapi.HostAPI     = upstream.System[systemapi.ServiceInfo]{}
)

// Clients are upstream's six front ends over one csiproxy host.
type Clients struct {
	Filesystem *filesystem.Filesystem
	Volume     *volume.Volume
	Disk       *disk.Disk
	SMB        *smb.SMB
	ISCSI      *iscsi.ISCSI
	System     *system.System
}

// FrontEnds builds upstream's front ends over h, as a driver switching to
// library mode does (docs/library-mode.md).
func FrontEnds(h *csiproxy.Host) (*Clients, error) {
	var c Clients
	var err error
	if c.Filesystem, err = filesystem.New(h.Filesystem()); err != nil {
		return nil, err
	}
	if c.Volume, err = volume.New(h.Volume()); err != nil {
		return nil, err
	}
	if c.Disk, err = disk.New(upstream.NewDisk[diskapi.DiskLocation, diskapi.DiskIDs](h.Disk())); err != nil {
		return nil, err
	}
	if c.SMB, err = smb.New(h.SMB(), c.Filesystem); err != nil {
		return nil, err
	}
	if c.ISCSI, err = iscsi.New(upstream.NewISCSI[iscsiapi.TargetPortal](h.ISCSI())); err != nil {
		return nil, err
	}
	if c.System, err = system.New(upstream.NewSystem[systemapi.ServiceInfo](h.System())); err != nil {
		return nil, err
	}
	return &c, nil
}

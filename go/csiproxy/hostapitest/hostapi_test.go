// Package hostapitest checks at compile time that every group type of
// csiproxy has the method set of upstream's library host API
// (kubernetes-csi/csi-proxy, branch library-development,
// pkg/<group>/hostapi.HostAPI). The interfaces are declared here from
// upstream's, with csiproxy's DiskLocation, DiskIDs, TargetPortal and
// ServiceInfo in place of upstream's types of the same names and fields.
package hostapitest

import (
	"testing"

	"example.invalid/csi-proxy-rs/go/csiproxy"
)

type FilesystemHostAPI interface {
	PathExists(path string) (bool, error)
	PathValid(path string) (bool, error)
	Mkdir(path string) error
	Rmdir(path string, force bool) error
	RmdirContents(path string) error
	CreateSymlink(oldname string, newname string) error
	IsSymlink(path string) (bool, error)
}

type VolumeHostAPI interface {
	ListVolumesOnDisk(diskNumber uint32, partitionNumber uint32) (volumeIDs []string, err error)
	MountVolume(volumeID, targetPath string) error
	UnmountVolume(volumeID, targetPath string) error
	IsVolumeFormatted(volumeID string) (bool, error)
	FormatVolume(volumeID string) error
	ResizeVolume(volumeID string, sizeBytes int64) error
	GetVolumeStats(volumeID string) (int64, int64, error)
	GetDiskNumberFromVolumeID(volumeID string) (uint32, error)
	GetVolumeIDFromTargetPath(targetPath string) (string, error)
	WriteVolumeCache(volumeID string) error
	GetClosestVolumeIDFromTargetPath(targetPath string) (string, error)
}

type DiskHostAPI interface {
	ListDiskLocations() (map[uint32]csiproxy.DiskLocation, error)
	IsDiskInitialized(diskNumber uint32) (bool, error)
	InitializeDisk(diskNumber uint32) error
	BasicPartitionsExist(diskNumber uint32) (bool, error)
	CreateBasicPartition(diskNumber uint32) error
	Rescan() error
	ListDiskIDs() (map[uint32]csiproxy.DiskIDs, error)
	GetDiskStats(diskNumber uint32) (int64, error)
	SetDiskState(diskNumber uint32, isOnline bool) error
	GetDiskState(diskNumber uint32) (bool, error)
}

type SMBHostAPI interface {
	IsSMBMapped(remotePath string) (bool, error)
	NewSMBLink(remotePath, localPath string) error
	NewSMBGlobalMapping(remotePath, username, password string) error
	RemoveSMBGlobalMapping(remotePath string) error
}

type ISCSIHostAPI interface {
	AddTargetPortal(portal *csiproxy.TargetPortal) error
	DiscoverTargetPortal(portal *csiproxy.TargetPortal) ([]string, error)
	ListTargetPortals() ([]csiproxy.TargetPortal, error)
	RemoveTargetPortal(portal *csiproxy.TargetPortal) error
	ConnectTarget(portal *csiproxy.TargetPortal, iqn string, authType string,
		chapUser string, chapSecret string) error
	DisconnectTarget(portal *csiproxy.TargetPortal, iqn string) error
	GetTargetDisks(portal *csiproxy.TargetPortal, iqn string) ([]string, error)
	SetMutualChapSecret(mutualChapSecret string) error
}

type SystemHostAPI interface {
	GetBIOSSerialNumber() (string, error)
	GetService(name string) (*csiproxy.ServiceInfo, error)
	StartService(name string) error
	StopService(name string, force bool) error
}

var (
	_ FilesystemHostAPI = (*csiproxy.Filesystem)(nil)
	_ VolumeHostAPI     = (*csiproxy.Volume)(nil)
	_ DiskHostAPI       = (*csiproxy.Disk)(nil)
	_ SMBHostAPI        = (*csiproxy.SMB)(nil)
	_ ISCSIHostAPI      = (*csiproxy.ISCSI)(nil)
	_ SystemHostAPI     = (*csiproxy.System)(nil)
)

// The field sets of the four types upstream's signatures name: a
// conversion from a struct literal of upstream's fields compiles only if
// names and types match.
func TestUpstreamTypesHaveUpstreamFields(t *testing.T) {
	type diskLocation struct{ Adapter, Bus, Target, LUNID string }
	type diskIDs struct{ Page83, SerialNumber string }
	type targetPortal struct {
		Address string
		Port    uint32
	}
	type serviceInfo struct{ DisplayName, StartType, Status string }
	l := csiproxy.DiskLocation(diskLocation{"a", "b", "t", "l"})
	i := csiproxy.DiskIDs(diskIDs{"p", "s"})
	p := csiproxy.TargetPortal(targetPortal{"10.0.0.1", 3260})
	s := csiproxy.ServiceInfo(serviceInfo{"d", "Auto", "Running"})
	if l.LUNID != "l" || i.SerialNumber != "s" || p.Port != 3260 || s.Status != "Running" {
		t.Fatal("fields do not round-trip")
	}
}

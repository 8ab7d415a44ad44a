package upstream_test

import "example.invalid/csi-proxy-rs/go/csiproxy/upstream"

// Stand-ins declared as upstream's hostapi types are (fields and tags), and
// the three interfaces that name them, declared from upstream's.
type DiskLocation struct {
	Adapter string
	Bus     string
	Target  string
	LUNID   string
}

type DiskIDs struct {
	Page83       string
	SerialNumber string
}

type TargetPortal struct {
	Address string `json:"TargetPortalAddress"`
	Port    uint32 `json:"TargetPortalPortNumber"`
}

type ServiceInfo struct {
	DisplayName string `json:"DisplayName"`
	StartType   string `json:"StartType"`
	Status      string `json:"Status"`
}

type DiskHostAPI interface {
	ListDiskLocations() (map[uint32]DiskLocation, error)
	IsDiskInitialized(diskNumber uint32) (bool, error)
	InitializeDisk(diskNumber uint32) error
	BasicPartitionsExist(diskNumber uint32) (bool, error)
	CreateBasicPartition(diskNumber uint32) error
	Rescan() error
	ListDiskIDs() (map[uint32]DiskIDs, error)
	GetDiskStats(diskNumber uint32) (int64, error)
	SetDiskState(diskNumber uint32, isOnline bool) error
	GetDiskState(diskNumber uint32) (bool, error)
}

type ISCSIHostAPI interface {
	AddTargetPortal(portal *TargetPortal) error
	DiscoverTargetPortal(portal *TargetPortal) ([]string, error)
	ListTargetPortals() ([]TargetPortal, error)
	RemoveTargetPortal(portal *TargetPortal) error
	ConnectTarget(portal *TargetPortal, iqn string, authType string,
		chapUser string, chapSecret string) error
	DisconnectTarget(portal *TargetPortal, iqn string) error
	GetTargetDisks(portal *TargetPortal, iqn string) ([]string, error)
	SetMutualChapSecret(mutualChapSecret string) error
}

type SystemHostAPI interface {
	GetBIOSSerialNumber() (string, error)
	GetService(name string) (*ServiceInfo, error)
	StartService(name string) error
	StopService(name string, force bool) error
}

var (
	_ DiskHostAPI   = upstream.NewDisk[DiskLocation, DiskIDs](nil)
	_ ISCSIHostAPI  = upstream.NewISCSI[TargetPortal](nil)
	_ SystemHostAPI = upstream.NewSystem[ServiceInfo](nil)
)

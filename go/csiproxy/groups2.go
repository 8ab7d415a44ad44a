package csiproxy

// DiskLocation is where a disk sits (upstream's hostapi.DiskLocation).
type DiskLocation struct {
	Adapter string
	Bus     string
	Target  string
	LUNID   string
}

// DiskIDs are a disk's identifiers (upstream's hostapi.DiskIDs).
type DiskIDs struct {
	Page83       string
	SerialNumber string
}

// Disk is the Disk group (disk/v1 and the finer partitioning steps).
type Disk struct{ h *Host }

func (d *Disk) numberCall(method string, diskNumber uint32) (message, error) {
	var e encoder
	e.uint(1, uint64(diskNumber))
	return d.h.call("disk", method, e)
}

// entries decodes a map<uint32, message> field.
func entries(m message, field int, each func(uint32, message)) error {
	es, err := m.messages(field)
	if err != nil {
		return err
	}
	for _, entry := range es {
		v, err := decode(entry.last(2).b)
		if err != nil {
			return err
		}
		each(uint32(entry.uint(1)), v)
	}
	return nil
}

// ListDiskLocations returns every disk's location by disk number.
func (d *Disk) ListDiskLocations() (map[uint32]DiskLocation, error) {
	m, err := d.h.call("disk", "ListDiskLocations", nil)
	if err != nil {
		return nil, err
	}
	out := map[uint32]DiskLocation{}
	err = entries(m, 1, func(n uint32, v message) {
		out[n] = DiskLocation{v.str(1), v.str(2), v.str(3), v.str(4)}
	})
	return out, err
}

// IsDiskInitialized reports whether a disk has a partition table.
func (d *Disk) IsDiskInitialized(diskNumber uint32) (bool, error) {
	m, err := d.numberCall("IsDiskInitialized", diskNumber)
	return m.boolean(1), err
}

// InitializeDisk gives a raw disk an empty GPT.
func (d *Disk) InitializeDisk(diskNumber uint32) error {
	_, err := d.numberCall("InitializeDisk", diskNumber)
	return err
}

// BasicPartitionsExist reports whether a disk has a data partition.
func (d *Disk) BasicPartitionsExist(diskNumber uint32) (bool, error) {
	m, err := d.numberCall("BasicPartitionsExist", diskNumber)
	return m.boolean(1), err
}

// CreateBasicPartition creates one basic data partition on an initialised
// disk that has none.
func (d *Disk) CreateBasicPartition(diskNumber uint32) error {
	_, err := d.numberCall("CreateBasicPartition", diskNumber)
	return err
}

// Rescan refreshes the host's view of disks.
func (d *Disk) Rescan() error {
	_, err := d.h.call("disk", "Rescan", nil)
	return err
}

// ListDiskIDs returns every disk's identifiers by disk number.
func (d *Disk) ListDiskIDs() (map[uint32]DiskIDs, error) {
	m, err := d.h.call("disk", "ListDiskIDs", nil)
	if err != nil {
		return nil, err
	}
	out := map[uint32]DiskIDs{}
	err = entries(m, 1, func(n uint32, v message) { out[n] = DiskIDs{v.str(1), v.str(2)} })
	return out, err
}

// GetDiskStats returns a disk's size in bytes.
func (d *Disk) GetDiskStats(diskNumber uint32) (int64, error) {
	m, err := d.numberCall("GetDiskStats", diskNumber)
	return m.int64(1), err
}

// SetDiskState brings a disk online or takes it offline.
func (d *Disk) SetDiskState(diskNumber uint32, isOnline bool) error {
	var e encoder
	e.uint(1, uint64(diskNumber))
	e.boolean(2, isOnline)
	_, err := d.h.call("disk", "SetDiskState", e)
	return err
}

// GetDiskState reports whether a disk is online.
func (d *Disk) GetDiskState(diskNumber uint32) (bool, error) {
	m, err := d.numberCall("GetDiskState", diskNumber)
	return m.boolean(1), err
}

// SMB is the SMB group (smb/v1 and the finer steps).
type SMB struct{ h *Host }

// IsSMBMapped reports whether remotePath's share is mapped and reachable.
func (s *SMB) IsSMBMapped(remotePath string) (bool, error) {
	var e encoder
	e.str(1, remotePath)
	m, err := s.h.call("smb", "IsSMBMapped", e)
	return m.boolean(1), err
}

// NewSMBLink creates the local link localPath to remotePath.
func (s *SMB) NewSMBLink(remotePath, localPath string) error {
	var e encoder
	e.str(1, remotePath)
	e.str(2, localPath)
	_, err := s.h.call("smb", "NewSMBLink", e)
	return err
}

// NewSMBGlobalMapping maps remotePath's share host-wide.
func (s *SMB) NewSMBGlobalMapping(remotePath, username, password string) error {
	var e encoder
	e.str(1, remotePath)
	e.str(3, username)
	e.str(4, password)
	defer e.wipe()
	_, err := s.h.call("smb", "NewSmbGlobalMapping", e)
	return err
}

// RemoveSMBGlobalMapping removes the mapping of remotePath's share.
func (s *SMB) RemoveSMBGlobalMapping(remotePath string) error {
	var e encoder
	e.str(1, remotePath)
	_, err := s.h.call("smb", "RemoveSmbGlobalMapping", e)
	return err
}

// TargetPortal is an iSCSI target portal (upstream's hostapi.TargetPortal).
type TargetPortal struct {
	Address string
	Port    uint32
}

func (p *TargetPortal) encode() encoder {
	var e encoder
	if p != nil {
		e.str(1, p.Address)
		e.uint(2, uint64(p.Port))
	}
	return e
}

// ISCSI is the iSCSI group (iscsi/v1alpha2).
type ISCSI struct{ h *Host }

func (i *ISCSI) portalCall(method string, portal *TargetPortal, iqn string) (message, error) {
	var e encoder
	e.message(1, portal.encode())
	e.str(2, iqn)
	return i.h.call("iscsi", method, e)
}

// AddTargetPortal adds a target portal.
func (i *ISCSI) AddTargetPortal(portal *TargetPortal) error {
	_, err := i.portalCall("AddTargetPortal", portal, "")
	return err
}

// DiscoverTargetPortal returns the IQNs a portal offers.
func (i *ISCSI) DiscoverTargetPortal(portal *TargetPortal) ([]string, error) {
	m, err := i.portalCall("DiscoverTargetPortal", portal, "")
	if err != nil {
		return nil, err
	}
	return m.strs(1), nil
}

// ListTargetPortals lists the target portals.
func (i *ISCSI) ListTargetPortals() ([]TargetPortal, error) {
	m, err := i.h.call("iscsi", "ListTargetPortals", nil)
	if err != nil {
		return nil, err
	}
	ps, err := m.messages(1)
	if err != nil {
		return nil, err
	}
	out := make([]TargetPortal, 0, len(ps))
	for _, p := range ps {
		out = append(out, TargetPortal{p.str(1), uint32(p.uint(2))})
	}
	return out, nil
}

// RemoveTargetPortal removes a target portal.
func (i *ISCSI) RemoveTargetPortal(portal *TargetPortal) error {
	_, err := i.portalCall("RemoveTargetPortal", portal, "")
	return err
}

// authTypes are upstream's authType strings and the proto's values.
var authTypes = map[string]uint64{"NONE": 0, "ONEWAYCHAP": 1, "MUTUALCHAP": 2}

// ConnectTarget logs in to a target; authType is NONE, ONEWAYCHAP or
// MUTUALCHAP.
func (i *ISCSI) ConnectTarget(portal *TargetPortal, iqn string, authType string,
	chapUser string, chapSecret string) error {
	auth, ok := authTypes[authType]
	if !ok {
		return &Error{InvalidArgument, "unknown authentication type " + authType + " (NONE, ONEWAYCHAP, MUTUALCHAP)"}
	}
	var e encoder
	e.message(1, portal.encode())
	e.str(2, iqn)
	e.uint(3, auth)
	e.str(4, chapUser)
	e.str(5, chapSecret)
	defer e.wipe()
	_, err := i.h.call("iscsi", "ConnectTarget", e)
	return err
}

// DisconnectTarget logs out of a target.
func (i *ISCSI) DisconnectTarget(portal *TargetPortal, iqn string) error {
	_, err := i.portalCall("DisconnectTarget", portal, iqn)
	return err
}

// GetTargetDisks returns the disks of a target.
func (i *ISCSI) GetTargetDisks(portal *TargetPortal, iqn string) ([]string, error) {
	m, err := i.portalCall("GetTargetDisks", portal, iqn)
	if err != nil {
		return nil, err
	}
	return m.strs(1), nil
}

// SetMutualChapSecret sets the initiator's mutual CHAP secret.
func (i *ISCSI) SetMutualChapSecret(mutualChapSecret string) error {
	var e encoder
	e.str(1, mutualChapSecret)
	defer e.wipe()
	_, err := i.h.call("iscsi", "SetMutualChapSecret", e)
	return err
}

// ServiceInfo describes a service (upstream's hostapi.ServiceInfo: WMI's
// StartMode and State words).
type ServiceInfo struct {
	DisplayName string
	StartType   string
	Status      string
}

var startTypes = []string{"Boot", "System", "Auto", "Manual", "Disabled"}
var statuses = []string{"Unknown", "Stopped", "Start Pending", "Stop Pending", "Running",
	"Continue Pending", "Pause Pending", "Paused"}

func word(words []string, n uint64) string {
	if n < uint64(len(words)) {
		return words[n]
	}
	return "Unknown"
}

// System is the System group (system/v1alpha1).
type System struct{ h *Host }

// GetBIOSSerialNumber returns the BIOS serial number.
func (s *System) GetBIOSSerialNumber() (string, error) {
	m, err := s.h.call("system", "GetBIOSSerialNumber", nil)
	return m.str(1), err
}

func (s *System) nameCall(method, name string, force bool) (message, error) {
	var e encoder
	e.str(1, name)
	e.boolean(2, force)
	return s.h.call("system", method, e)
}

// GetService describes a service.
func (s *System) GetService(name string) (*ServiceInfo, error) {
	m, err := s.nameCall("GetService", name, false)
	if err != nil {
		return nil, err
	}
	return &ServiceInfo{m.str(1), word(startTypes, m.uint(2)), word(statuses, m.uint(3))}, nil
}

// StartService starts a service.
func (s *System) StartService(name string) error {
	_, err := s.nameCall("StartService", name, false)
	return err
}

// StopService stops a service (with its dependents if force).
func (s *System) StopService(name string, force bool) error {
	_, err := s.nameCall("StopService", name, force)
	return err
}

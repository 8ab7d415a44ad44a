// Package upstream adapts csiproxy's group types to upstream's library host
// API interfaces where their signatures name upstream's own types
// (hostapi.DiskLocation, DiskIDs, TargetPortal, ServiceInfo), without
// importing upstream: the adapters are generic over those types, whose
// field sets (and struct tags) the constraints spell out. A driver built
// against kubernetes-csi/csi-proxy/v2 instantiates them with upstream's
// types and gets values of upstream's interfaces:
//
//	var d diskapi.HostAPI = upstream.NewDisk[diskapi.DiskLocation, diskapi.DiskIDs](host.Disk())
//	var i iscsiapi.HostAPI = upstream.NewISCSI[iscsiapi.TargetPortal](host.ISCSI())
//	var s systemapi.HostAPI = upstream.NewSystem[systemapi.ServiceInfo](host.System())
//
// Filesystem, Volume and SMB name no upstream type: csiproxy's own types
// satisfy upstream's interfaces as they are.
package upstream

import "example.invalid/csi-proxy-rs/go/csiproxy"

// DiskLocation is the shape of upstream's hostapi.DiskLocation.
type DiskLocation interface {
	~struct {
		Adapter string
		Bus     string
		Target  string
		LUNID   string
	}
}

// DiskIDs is the shape of upstream's hostapi.DiskIDs.
type DiskIDs interface {
	~struct {
		Page83       string
		SerialNumber string
	}
}

// TargetPortal is the shape of upstream's hostapi.TargetPortal.
type TargetPortal interface {
	~struct {
		Address string `json:"TargetPortalAddress"`
		Port    uint32 `json:"TargetPortalPortNumber"`
	}
}

// ServiceInfo is the shape of upstream's hostapi.ServiceInfo.
type ServiceInfo interface {
	~struct {
		DisplayName string `json:"DisplayName"`
		StartType   string `json:"StartType"`
		Status      string `json:"Status"`
	}
}

// Disk is csiproxy's Disk with upstream's map value types.
type Disk[L DiskLocation, I DiskIDs] struct{ *csiproxy.Disk }

// NewDisk adapts d.
func NewDisk[L DiskLocation, I DiskIDs](d *csiproxy.Disk) Disk[L, I] { return Disk[L, I]{d} }

// ListDiskLocations returns every disk's location by disk number.
func (d Disk[L, I]) ListDiskLocations() (map[uint32]L, error) {
	m, err := d.Disk.ListDiskLocations()
	if err != nil {
		return nil, err
	}
	out := make(map[uint32]L, len(m))
	for n, l := range m {
		out[n] = L(l)
	}
	return out, nil
}

// ListDiskIDs returns every disk's identifiers by disk number.
func (d Disk[L, I]) ListDiskIDs() (map[uint32]I, error) {
	m, err := d.Disk.ListDiskIDs()
	if err != nil {
		return nil, err
	}
	out := make(map[uint32]I, len(m))
	for n, ids := range m {
		out[n] = I(ids)
	}
	return out, nil
}

// ISCSI is csiproxy's ISCSI over upstream's TargetPortal.
type ISCSI[P TargetPortal] struct{ i *csiproxy.ISCSI }

// NewISCSI adapts i.
func NewISCSI[P TargetPortal](i *csiproxy.ISCSI) ISCSI[P] { return ISCSI[P]{i} }

func portal[P TargetPortal](p *P) *csiproxy.TargetPortal {
	if p == nil {
		return nil
	}
	c := csiproxy.TargetPortal(*p)
	return &c
}

// AddTargetPortal adds a target portal.
func (a ISCSI[P]) AddTargetPortal(p *P) error { return a.i.AddTargetPortal(portal(p)) }

// DiscoverTargetPortal returns the IQNs a portal offers.
func (a ISCSI[P]) DiscoverTargetPortal(p *P) ([]string, error) {
	return a.i.DiscoverTargetPortal(portal(p))
}

// ListTargetPortals lists the target portals.
func (a ISCSI[P]) ListTargetPortals() ([]P, error) {
	ps, err := a.i.ListTargetPortals()
	if err != nil {
		return nil, err
	}
	out := make([]P, 0, len(ps))
	for _, p := range ps {
		out = append(out, P(p))
	}
	return out, nil
}

// RemoveTargetPortal removes a target portal.
func (a ISCSI[P]) RemoveTargetPortal(p *P) error { return a.i.RemoveTargetPortal(portal(p)) }

// ConnectTarget logs in to a target.
func (a ISCSI[P]) ConnectTarget(p *P, iqn string, authType string, chapUser string, chapSecret string) error {
	return a.i.ConnectTarget(portal(p), iqn, authType, chapUser, chapSecret)
}

// DisconnectTarget logs out of a target.
func (a ISCSI[P]) DisconnectTarget(p *P, iqn string) error {
	return a.i.DisconnectTarget(portal(p), iqn)
}

// GetTargetDisks returns the disks of a target.
func (a ISCSI[P]) GetTargetDisks(p *P, iqn string) ([]string, error) {
	return a.i.GetTargetDisks(portal(p), iqn)
}

// SetMutualChapSecret sets the initiator's mutual CHAP secret.
func (a ISCSI[P]) SetMutualChapSecret(secret string) error { return a.i.SetMutualChapSecret(secret) }

// System is csiproxy's System with upstream's ServiceInfo.
type System[S ServiceInfo] struct{ *csiproxy.System }

// NewSystem adapts s.
func NewSystem[S ServiceInfo](s *csiproxy.System) System[S] { return System[S]{s} }

// GetService describes a service.
func (s System[S]) GetService(name string) (*S, error) {
	info, err := s.System.GetService(name)
	if err != nil {
		return nil, err
	}
	out := S(*info)
	return &out, nil
}

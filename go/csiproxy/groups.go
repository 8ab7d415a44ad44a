package csiproxy

// The groups' method sets: those of upstream's library host API
// (pkg/<group>/hostapi.HostAPI), each call encoded as the request of the
// group's newest API version (or, for the finer steps upstream's library
// has beyond the proto methods, the library's own messages: see
// docs/library-mode.md).

// Filesystem is the Filesystem group (filesystem/v2alpha1). Its calls
// answer NotFound, AlreadyExists and PermissionDenied as *fs.PathError, as
// upstream's host does (see pathError); other codes as *Error.
type Filesystem struct{ h *Host }

func (f *Filesystem) pathCall(method, path string) (message, error) {
	var e encoder
	e.str(1, path)
	m, err := f.h.call("filesystem", method, e)
	return m, pathError(method, path, err)
}

// PathExists reports whether anything (a link counts) is at path.
func (f *Filesystem) PathExists(path string) (bool, error) {
	m, err := f.pathCall("PathExists", path)
	return m.boolean(1), err
}

// PathValid reports whether path can be used: something is there and a
// link into the allowed roots leads to something.
func (f *Filesystem) PathValid(path string) (bool, error) {
	m, err := f.pathCall("PathValid", path)
	return m.boolean(1), err
}

// Mkdir creates path and its parents.
func (f *Filesystem) Mkdir(path string) error {
	_, err := f.pathCall("Mkdir", path)
	return err
}

// Rmdir removes the directory path (with everything below it if force).
func (f *Filesystem) Rmdir(path string, force bool) error {
	var e encoder
	e.str(1, path)
	e.boolean(2, force)
	_, err := f.h.call("filesystem", "Rmdir", e)
	return pathError("Rmdir", path, err)
}

// RmdirContents removes what is inside the directory path.
func (f *Filesystem) RmdirContents(path string) error {
	_, err := f.pathCall("RmdirContents", path)
	return err
}

// CreateSymlink creates the link newname pointing to oldname.
func (f *Filesystem) CreateSymlink(oldname string, newname string) error {
	var e encoder
	e.str(1, oldname)
	e.str(2, newname)
	_, err := f.h.call("filesystem", "CreateSymlink", e)
	return pathError("CreateSymlink", newname, err)
}

// IsSymlink reports whether path is a link (or a mount point).
func (f *Filesystem) IsSymlink(path string) (bool, error) {
	m, err := f.pathCall("IsSymlink", path)
	return m.boolean(1), err
}

// Volume is the Volume group (volume/v2alpha1).
type Volume struct{ h *Host }

func (v *Volume) volumeCall(method, volumeID string) (message, error) {
	var e encoder
	e.str(1, volumeID)
	return v.h.call("volume", method, e)
}

// ListVolumesOnDisk lists the volumes of a disk (partition 0: all).
func (v *Volume) ListVolumesOnDisk(diskNumber uint32, partitionNumber uint32) (volumeIDs []string, err error) {
	var e encoder
	e.uint(1, uint64(diskNumber))
	e.uint(2, uint64(partitionNumber))
	m, err := v.h.call("volume", "ListVolumesOnDisk", e)
	if err != nil {
		return nil, err
	}
	return m.strs(1), nil
}

// MountVolume mounts a volume at targetPath.
func (v *Volume) MountVolume(volumeID, targetPath string) error {
	var e encoder
	e.str(1, volumeID)
	e.str(2, targetPath)
	_, err := v.h.call("volume", "MountVolume", e)
	return err
}

// UnmountVolume unmounts a volume from targetPath.
func (v *Volume) UnmountVolume(volumeID, targetPath string) error {
	var e encoder
	e.str(1, volumeID)
	e.str(2, targetPath)
	_, err := v.h.call("volume", "UnmountVolume", e)
	return err
}

// IsVolumeFormatted reports whether a volume has a filesystem.
func (v *Volume) IsVolumeFormatted(volumeID string) (bool, error) {
	m, err := v.volumeCall("IsVolumeFormatted", volumeID)
	return m.boolean(1), err
}

// FormatVolume formats a volume.
func (v *Volume) FormatVolume(volumeID string) error {
	_, err := v.volumeCall("FormatVolume", volumeID)
	return err
}

// ResizeVolume resizes a volume (0: to the whole partition space).
func (v *Volume) ResizeVolume(volumeID string, sizeBytes int64) error {
	var e encoder
	e.str(1, volumeID)
	e.int64(2, sizeBytes)
	_, err := v.h.call("volume", "ResizeVolume", e)
	return err
}

// GetVolumeStats returns a volume's total and used bytes.
func (v *Volume) GetVolumeStats(volumeID string) (int64, int64, error) {
	m, err := v.volumeCall("GetVolumeStats", volumeID)
	if err != nil {
		return 0, 0, err
	}
	return m.int64(1), m.int64(2), nil
}

// GetDiskNumberFromVolumeID returns the disk holding a volume.
func (v *Volume) GetDiskNumberFromVolumeID(volumeID string) (uint32, error) {
	m, err := v.volumeCall("GetDiskNumberFromVolumeID", volumeID)
	return uint32(m.uint(1)), err
}

// GetVolumeIDFromTargetPath returns the volume mounted at targetPath.
func (v *Volume) GetVolumeIDFromTargetPath(targetPath string) (string, error) {
	var e encoder
	e.str(1, targetPath)
	m, err := v.h.call("volume", "GetVolumeIDFromTargetPath", e)
	return m.str(1), err
}

// WriteVolumeCache flushes a volume's cache.
func (v *Volume) WriteVolumeCache(volumeID string) error {
	_, err := v.volumeCall("WriteVolumeCache", volumeID)
	return err
}

// GetClosestVolumeIDFromTargetPath returns the volume targetPath is on.
func (v *Volume) GetClosestVolumeIDFromTargetPath(targetPath string) (string, error) {
	var e encoder
	e.str(1, targetPath)
	m, err := v.h.call("volume", "GetClosestVolumeIDFromTargetPath", e)
	return m.str(1), err
}

//go:build windows
// +build windows

package csiproxy_test

// aws-ebs-csi-driver in library mode (its CSIProxyMounterV2, over
// kubernetes-csi/csi-proxy/v2, whose pkg/volume front end returns the host
// API's error unchanged) on a staging path where nothing is mounted: the
// driver must take its "not mounted" branch with csi_proxy.dll as it does
// with upstream's v2.0.0-alpha.1 library. The driver's logic, copied from
// kubernetes-sigs/aws-ebs-csi-driver at 429e202e589798e55c0f8ddcc81b2850b7f000d0:
//   - pkg/mounter/mount_windows_proxyV2.go CSIProxyMounterV2.GetDeviceNameFromMount:
//     GetVolumeIDFromTargetPath, then GetDiskNumberFromVolumeID, errors
//     returned as they are;
//   - pkg/mounter/mount_windows.go handleGetDeviceNameFromMountError: the
//     error text matched against awsEbsNotMounted; a match is ("", 0, nil);
//   - pkg/driver/node.go: NodeStageVolume fails with Internal on an error,
//     else mounts; NodeUnstageVolume fails with Internal on an error, and
//     answers OK when the ref count is 0.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"example.invalid/csi-proxy-rs/go/csiproxy"
)

// awsEbsNotMounted is the driver's pattern, verbatim.
const awsEbsNotMounted = `(Get-Item -Path \S+).Target, output: , error: <nil>|because it does not exist`

func awsEbsGetDeviceNameFromMount(v *csiproxy.Volume, mountPath string) (string, int, error) {
	device, err := func() (string, error) {
		id, err := v.GetVolumeIDFromTargetPath(mountPath)
		if err != nil {
			return "", err
		}
		disk, err := v.GetDiskNumberFromVolumeID(id)
		if err != nil {
			return "", err
		}
		return fmt.Sprint(disk), nil
	}()
	if err != nil {
		matched, matchErr := regexp.MatchString(awsEbsNotMounted, err.Error())
		if matched {
			return "", 0, nil
		}
		if matchErr != nil {
			return "", 0, fmt.Errorf("error processing error message: %v, matching pattern %q: %v", err, awsEbsNotMounted, matchErr)
		}
		return "", 0, fmt.Errorf("error getting device name from mount: %v", err)
	}
	return device, 1, nil
}

func TestAwsEbsStagingTakesTheNotMountedBranch(t *testing.T) {
	e := open(t)
	plugin := filepath.Join(e.kubelet, "plugins", "kubernetes.io", "csi", "ebs.csi.aws.com")
	staged := filepath.Join(plugin, "0123abcd", "globalmount")
	if err := os.MkdirAll(staged, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{
		staged,                                 // the kubelet made it: a plain directory
		filepath.Join(plugin, "0123abcd", "x"), // not made yet
		filepath.Join(plugin, "4567ef", "globalmount"), // its parent neither
	} {
		// Upstream's library errors here too: an error, never a volume.
		_, raw := e.host.Volume().GetVolumeIDFromTargetPath(dir)
		wantCode(t, "GetVolumeIDFromTargetPath "+dir, raw, csiproxy.NotFound)
		device, refCount, err := awsEbsGetDeviceNameFromMount(e.host.Volume(), dir)
		if err != nil {
			t.Errorf("NodeStageVolume/NodeUnstageVolume(%s) fail with Internal: %v", dir, err)
			continue
		}
		if device != "" || refCount != 0 {
			t.Errorf("%s: device %q, ref count %d: want the not-mounted branch", dir, device, refCount)
		}
	}
	e.sentinelKept(t)
}

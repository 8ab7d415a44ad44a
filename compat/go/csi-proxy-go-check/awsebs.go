package main

// The -aws-ebs mode: aws-ebs-csi-driver's GetDeviceNameFromMount sequence
// over the Volume API, as its NodeStageVolume and NodeUnstageVolume run it
// on a staging path where nothing is mounted, and the branch the driver
// takes. The driver's logic is copied as data and code shape from
// kubernetes-sigs/aws-ebs-csi-driver at 429e202e589798e55c0f8ddcc81b2850b7f000d0:
//   - pkg/mounter/mount_windows_proxyV1.go CSIProxyMounter.GetDeviceNameFromMount:
//     GetVolumeIDFromTargetPath, then GetDiskNumberFromVolumeID; any error
//     returned as is;
//   - pkg/mounter/mount_windows.go NodeMounter.GetDeviceNameFromMount and
//     handleGetDeviceNameFromMountError: the error text matched against
//     awsEbsNotMounted; a match is ("", 0, nil), anything else an error;
//   - pkg/driver/node.go NodeStageVolume (an error: Internal "failed to
//     check if volume is already mounted"; device == source: already
//     staged; else format and mount) and NodeUnstageVolume (an error:
//     Internal; refCount == 0: "target not mounted", OK).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"regexp"

	"github.com/golang/protobuf/ptypes/wrappers"
	"google.golang.org/grpc"
)

// awsEbsNotMounted is the driver's pattern, verbatim.
const awsEbsNotMounted = `(Get-Item -Path \S+).Target, output: , error: <nil>|because it does not exist`

var (
	awsEbs        = flag.Bool("aws-ebs", false, "instead of the Filesystem checks: run aws-ebs-csi-driver's GetDeviceNameFromMount on -staged and -unstaged over the Volume API at -endpoint and check it takes the driver's \"not mounted\" branch")
	volumeVersion = flag.String("volume-version", "v1", "with -aws-ebs: the Volume API version (aws-ebs uses v1; v1beta1 and v1beta2 name the call GetVolumeIDFromMount)")
	ebsStaged     = flag.String("staged", "", "with -aws-ebs: a staging directory that exists, with nothing mounted")
	ebsUnstaged   = flag.String("unstaged", "", "with -aws-ebs: a staging directory that does not exist")
)

// getDeviceNameFromMount mirrors the driver's CSIProxyMounter method.
func getDeviceNameFromMount(ctx context.Context, cc *grpc.ClientConn, mountPath string) (string, error) {
	method := "GetVolumeIDFromTargetPath"
	if *volumeVersion == "v1beta1" || *volumeVersion == "v1beta2" {
		method = "GetVolumeIDFromMount"
	}
	volumeID := &wrappers.StringValue{}
	if err := cc.Invoke(ctx, "/"+*volumeVersion+".Volume/"+method, str(mountPath), volumeID); err != nil {
		return "", err
	}
	diskNumber := &wrappers.UInt32Value{}
	if err := cc.Invoke(ctx, "/"+*volumeVersion+".Volume/GetDiskNumberFromVolumeID", volumeID, diskNumber); err != nil {
		return "", err
	}
	return fmt.Sprint(diskNumber.GetValue()), nil
}

// nodeGetDeviceNameFromMount mirrors the driver's NodeMounter method with
// handleGetDeviceNameFromMountError: (device, refCount, error).
func nodeGetDeviceNameFromMount(ctx context.Context, cc *grpc.ClientConn, mountPath string) (string, int, error) {
	deviceName, err := getDeviceNameFromMount(ctx, cc, mountPath)
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
	return deviceName, 1, nil
}

// The driver's branches, by name.
func nodeStageBranch(device string, err error) string {
	switch {
	case err != nil:
		return "Internal: failed to check if volume is already mounted: " + err.Error()
	case device == "1":
		return "already staged"
	default:
		return "format and mount"
	}
}

func nodeUnstageBranch(refCount int, err error) string {
	switch {
	case err != nil:
		return "Internal: failed to check if target is a mount point: " + err.Error()
	case refCount == 0:
		return "target not mounted: OK"
	default:
		return "unmount"
	}
}

func runAwsEbs(ctx context.Context) {
	if *ebsStaged == "" || *ebsUnstaged == "" {
		fmt.Println("FAIL  -aws-ebs needs -staged and -unstaged")
		failures++
		return
	}
	cc, err := grpc.Dial(*target,
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return dialEndpoint(ctx, *endpoint)
		}),
		grpc.WithInsecure())
	check(err == nil, "grpc.Dial(%s): %v", quote(*target), err)
	if err != nil {
		return
	}
	defer cc.Close()
	for _, dir := range []string{*ebsStaged, *ebsUnstaged} {
		device, refCount, err := nodeGetDeviceNameFromMount(ctx, cc, dir)
		stage := nodeStageBranch(device, err)
		unstage := nodeUnstageBranch(refCount, err)
		check(stage == "format and mount", "%s NodeStageVolume(%s): %s", *volumeVersion, quote(dir), stage)
		check(unstage == "target not mounted: OK", "%s NodeUnstageVolume(%s): %s", *volumeVersion, quote(dir), unstage)
		// The raw answer, for the log.
		_, raw := getDeviceNameFromMount(ctx, cc, dir)
		check(raw != nil && !errors.Is(raw, context.DeadlineExceeded), "%s GetVolumeIDFromTargetPath(%s) failed as upstream does: %v", *volumeVersion, quote(dir), raw)
	}
}

#!/bin/sh
# Checks the NVMe-related Windows layouts parse/nvme.rs writes out as
# constants against the mingw-w64 SDK headers (winioctl.h, ntddscsi.h,
# nvme.h): compiles static assertions, runs nothing. Needs
# x86_64-w64-mingw32-gcc (scripts/setup.sh installs it).
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/layouts.c" <<'C'
#include <windows.h>
#include <winioctl.h>
#include <ntddscsi.h>
#include <nvme.h>
#include <stddef.h>
#define A(x) _Static_assert(x, #x)
A(offsetof(STORAGE_PROPERTY_QUERY, AdditionalParameters) == 8);
A(sizeof(STORAGE_PROTOCOL_SPECIFIC_DATA) == 40);
A(offsetof(STORAGE_PROTOCOL_SPECIFIC_DATA, ProtocolType) == 0);
A(offsetof(STORAGE_PROTOCOL_SPECIFIC_DATA, DataType) == 4);
A(offsetof(STORAGE_PROTOCOL_SPECIFIC_DATA, ProtocolDataRequestValue) == 8);
A(offsetof(STORAGE_PROTOCOL_SPECIFIC_DATA, ProtocolDataRequestSubValue) == 12);
A(offsetof(STORAGE_PROTOCOL_SPECIFIC_DATA, ProtocolDataOffset) == 16);
A(offsetof(STORAGE_PROTOCOL_SPECIFIC_DATA, ProtocolDataLength) == 20);
A(offsetof(STORAGE_PROTOCOL_SPECIFIC_DATA, FixedProtocolReturnData) == 24);
A(sizeof(STORAGE_PROTOCOL_DATA_DESCRIPTOR) == 48);
A(offsetof(STORAGE_PROTOCOL_DATA_DESCRIPTOR, ProtocolSpecificData) == 8);
A(offsetof(STORAGE_ADAPTER_DESCRIPTOR, BusType) == 24);
A(offsetof(STORAGE_DEVICE_DESCRIPTOR, BusType) == 28);
A(sizeof(SCSI_ADDRESS) == 8);
A(offsetof(SCSI_ADDRESS, PortNumber) == 4);
A(offsetof(SCSI_ADDRESS, PathId) == 5);
A(offsetof(SCSI_ADDRESS, TargetId) == 6);
A(offsetof(SCSI_ADDRESS, Lun) == 7);
A(IOCTL_SCSI_GET_ADDRESS == 0x41018);
A(IOCTL_STORAGE_QUERY_PROPERTY == 0x2d1400);
A(StorageAdapterProtocolSpecificProperty == 49);
A(StorageDeviceProtocolSpecificProperty == 50);
A(ProtocolTypeNvme == 3);
A(NVMeDataTypeIdentify == 1);
A(BusTypeNvme == 0x11);
A(NVME_IDENTIFY_CNS_SPECIFIC_NAMESPACE == 0);
A(NVME_IDENTIFY_CNS_CONTROLLER == 1);
A(NVME_MAX_LOG_SIZE == 4096);
A(sizeof(NVME_IDENTIFY_NAMESPACE_DATA) == 4096);
A(offsetof(NVME_IDENTIFY_NAMESPACE_DATA, NGUID) == 104);
A(offsetof(NVME_IDENTIFY_NAMESPACE_DATA, EUI64) == 120);
A(sizeof(NVME_IDENTIFY_CONTROLLER_DATA) == 4096);
A(offsetof(NVME_IDENTIFY_CONTROLLER_DATA, SN) == 4);
A(sizeof(((NVME_IDENTIFY_CONTROLLER_DATA*)0)->SN) == 20);
A(offsetof(NVME_IDENTIFY_CONTROLLER_DATA, MN) == 24);
int main(void){return 0;}
C
x86_64-w64-mingw32-gcc -D_WIN32_WINNT=0x0A00 -DNTDDI_VERSION=0x0A000006 -c "$dir/layouts.c" -o "$dir/layouts.o"
echo "NVMe layouts match the mingw-w64 headers"

//! The WMI classes, properties, methods and parameters the Windows
//! backends use, each with the Rust type the code reads or passes it as.
//! `wmi_names!` makes one module per class (`CLASS`, a constant per
//! property, a module per method with `METHOD` and a constant per
//! parameter) and the table [`ALL`] the `wmi_schema` tests check against
//! the published definitions.

use super::{
    AnyOut, AnyOutUse, CimType, Class, ClassUses, Dir, Embedded, Method, MethodUses, Param, Prop,
    CIMV2_NAMESPACE, SMB_NAMESPACE, STORAGE_NAMESPACE,
};
use zeroize::Zeroizing;

macro_rules! wmi_names {
    ($(
        $(#[$meta:meta])*
        $cmod:ident = $cname:literal in $ns:ident {
            $( prop $pid:ident : $pty:ty = $pname:literal; )*
            $( method $mmod:ident = $mname:literal {
                $( $dir:ident $aid:ident : $aty:ty = $aname:literal; )*
            } )*
        }
    )*) => {
        $(
            $(#[$meta])*
            pub mod $cmod {
                #[allow(unused_imports)]
                use super::*;
                pub const CLASS: Class = Class { name: $cname, namespace: $ns };
                $( pub const $pid: Prop<$pty> = Prop::new(CLASS, $pname); )*
                $(
                    pub mod $mmod {
                        #[allow(unused_imports)]
                        use super::*;
                        pub const METHOD: Method = Method { class: CLASS, name: $mname };
                        $( pub const $aid: Param<$aty> = Param::new(METHOD, Dir::$dir, $aname); )*
                    }
                )*
                pub const USES: ClassUses = ClassUses {
                    class: CLASS,
                    props: &[$( ($pname, <$pty as CimType>::KIND) ),*],
                    methods: &[$(
                        MethodUses {
                            name: $mname,
                            params: &[$( ($aname, Dir::$dir, <$aty as CimType>::KIND) ),*],
                        }
                    ),*],
                };
            }
        )*
        /// Every class the code uses, with what it uses of it.
        pub const ALL: &[ClassUses] = &[$( $cmod::USES ),*];
    };
}

wmi_names! {
    /// A disk of the Storage Management API.
    disk = "MSFT_Disk" in STORAGE_NAMESPACE {
        prop NUMBER: u32 = "Number";
        prop LOCATION: String = "Location";
        prop IS_OFFLINE: bool = "IsOffline";
        prop IS_READ_ONLY: bool = "IsReadOnly";
        prop PARTITION_STYLE: u16 = "PartitionStyle";
        prop SIZE: u64 = "Size";
        prop SERIAL_NUMBER: String = "SerialNumber";
        prop GUID: String = "Guid";
        prop SIGNATURE: u32 = "Signature";
        method refresh = "Refresh" {}
        method initialize = "Initialize" {
            In PARTITION_STYLE: u16 = "PartitionStyle";
        }
        method create_partition = "CreatePartition" {
            In USE_MAXIMUM_SIZE: bool = "UseMaximumSize";
            In ASSIGN_DRIVE_LETTER: bool = "AssignDriveLetter";
            In GPT_TYPE: String = "GptType";
            In MBR_TYPE: u16 = "MbrType";
        }
    }
    /// A partition.
    partition = "MSFT_Partition" in STORAGE_NAMESPACE {
        prop DISK_NUMBER: u32 = "DiskNumber";
        prop PARTITION_NUMBER: u32 = "PartitionNumber";
        prop GPT_TYPE: String = "GptType";
        prop IS_OFFLINE: bool = "IsOffline";
        prop SIZE: u64 = "Size";
        method online = "Online" {}
        method resize = "Resize" {
            In SIZE: u64 = "Size";
        }
    }
    /// A volume.
    volume = "MSFT_Volume" in STORAGE_NAMESPACE {
        prop UNIQUE_ID: String = "UniqueId";
        method format = "Format" {
            In FILE_SYSTEM: String = "FileSystem";
            In FULL: bool = "Full";
            In FORCE: bool = "Force";
        }
    }
    /// The association of a partition and its volume.
    partition_to_volume = "MSFT_PartitionToVolume" in STORAGE_NAMESPACE {}
    /// Host-wide storage settings (the provider cache rescan).
    storage_setting = "MSFT_StorageSetting" in STORAGE_NAMESPACE {
        method update_host_storage_cache = "UpdateHostStorageCache" {}
    }
    /// A storage job a method started (ReturnValue 4096).
    storage_job = "MSFT_StorageJob" in STORAGE_NAMESPACE {
        prop JOB_STATE: u32 = "JobState";
        prop ERROR_CODE: u32 = "ErrorCode";
        prop ERROR_DESCRIPTION: String = "ErrorDescription";
    }
    /// The `ExtendedStatus` a storage method returns.
    storage_extended_status = "MSFT_StorageExtendedStatus" in STORAGE_NAMESPACE {
        prop MESSAGE: String = "Message";
    }
    /// An SMB global mapping.
    smb_global_mapping = "MSFT_SmbGlobalMapping" in SMB_NAMESPACE {
        prop REMOTE_PATH: String = "RemotePath";
        prop STATUS: u32 = "Status";
        method create = "Create" {
            In REMOTE_PATH: String = "RemotePath";
            In REQUIRE_PRIVACY: bool = "RequirePrivacy";
            In CREDENTIAL: Zeroizing<String> = "Credential";
        }
        method remove = "Remove" {
            In FORCE: bool = "Force";
        }
    }
    /// An iSCSI target portal of the initiator.
    iscsi_target_portal = "MSFT_iSCSITargetPortal" in STORAGE_NAMESPACE {
        prop TARGET_PORTAL_ADDRESS: String = "TargetPortalAddress";
        prop TARGET_PORTAL_PORT_NUMBER: u32 = "TargetPortalPortNumber";
        method new = "New" {
            In TARGET_PORTAL_ADDRESS: String = "TargetPortalAddress";
            In TARGET_PORTAL_PORT_NUMBER: u16 = "TargetPortalPortNumber";
        }
        method remove = "Remove" {
            In TARGET_PORTAL_ADDRESS: String = "TargetPortalAddress";
            In TARGET_PORTAL_PORT_NUMBER: u16 = "TargetPortalPortNumber";
        }
    }
    /// An iSCSI target.
    iscsi_target = "MSFT_iSCSITarget" in STORAGE_NAMESPACE {
        prop NODE_ADDRESS: String = "NodeAddress";
        prop IS_CONNECTED: bool = "IsConnected";
        method connect = "Connect" {
            In NODE_ADDRESS: String = "NodeAddress";
            In TARGET_PORTAL_ADDRESS: String = "TargetPortalAddress";
            In TARGET_PORTAL_PORT_NUMBER: u16 = "TargetPortalPortNumber";
            In AUTHENTICATION_TYPE: String = "AuthenticationType";
            In CHAP_USERNAME: String = "ChapUsername";
            In CHAP_SECRET: Zeroizing<String> = "ChapSecret";
        }
        method disconnect = "Disconnect" {
            In SESSION_IDENTIFIER: String = "SessionIdentifier";
        }
    }
    /// An iSCSI session.
    iscsi_session = "MSFT_iSCSISession" in STORAGE_NAMESPACE {
        prop IS_PERSISTENT: bool = "IsPersistent";
        prop SESSION_IDENTIFIER: String = "SessionIdentifier";
        method unregister = "Unregister" {}
        method set_chap_secret = "SetCHAPSecret" {
            In CHAP_SECRET: Zeroizing<String> = "ChapSecret";
        }
    }
    /// An iSCSI connection.
    iscsi_connection = "MSFT_iSCSIConnection" in STORAGE_NAMESPACE {}
    /// Target ↔ portal.
    iscsi_target_to_portal = "MSFT_iSCSITargetToiSCSITargetPortal" in STORAGE_NAMESPACE {}
    /// Target ↔ session.
    iscsi_target_to_session = "MSFT_iSCSITargetToiSCSISession" in STORAGE_NAMESPACE {}
    /// Target ↔ connection.
    iscsi_target_to_connection = "MSFT_iSCSITargetToiSCSIConnection" in STORAGE_NAMESPACE {}
    /// Connection ↔ disk.
    iscsi_connection_to_disk = "MSFT_iSCSIConnectionToDisk" in STORAGE_NAMESPACE {}
    /// The BIOS (its serial number).
    bios = "Win32_BIOS" in CIMV2_NAMESPACE {
        prop SERIAL_NUMBER: String = "SerialNumber";
    }
}

/// Every method's result code.
pub const RETURN_VALUE: AnyOut<u32> = AnyOut::new("ReturnValue", true);
/// The storage provider's error detail (`MSFT_StorageExtendedStatus`).
pub const EXTENDED_STATUS: AnyOut<Embedded> = AnyOut::new("ExtendedStatus", false);
/// The job a storage method started (`MSFT_StorageJob`, ReturnValue 4096).
pub const CREATED_STORAGE_JOB: AnyOut<Embedded> = AnyOut::new("CreatedStorageJob", false);

/// The out-parameters read from whichever method was called.
pub const ANY_OUT: &[AnyOutUse] = &[
    RETURN_VALUE.uses(),
    EXTENDED_STATUS.uses(),
    CREATED_STORAGE_JOB.uses(),
];

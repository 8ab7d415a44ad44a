//! Tests of the Windows backend against the real OS (run under wine in CI:
//! only what wine implements is asserted; see docs/windows-storage.md).

use super::wmi::{WmiWorker, CIMV2_NAMESPACE, STORAGE_NAMESPACE};

#[test]
fn wmi_worker_queries_cimv2_and_the_storage_namespace() {
    let w = WmiWorker::new(CIMV2_NAMESPACE);
    let captions = w
        .call(|wmi| {
            let rows = wmi.query("SELECT Caption FROM Win32_OperatingSystem")?;
            rows.iter()
                .map(|r| r.string("Caption"))
                .collect::<crate::Result<Vec<_>>>()
        })
        .unwrap();
    assert_eq!(captions.len(), 1, "{captions:?}");
    assert!(captions[0].as_deref().is_some_and(|c| !c.is_empty()));
    // The same warm worker, another namespace: wine has no MSFT_* classes
    // and answers 0 rows; Windows has the class.
    let n = w
        .call(|wmi| {
            Ok(wmi
                .query_in(STORAGE_NAMESPACE, "SELECT Number FROM MSFT_Disk")?
                .len())
        })
        .unwrap();
    let _ = n;
    // A job that panics does not kill the worker.
    let e = w
        .call(|_| -> crate::Result<()> { panic!("boom") })
        .unwrap_err();
    assert!(matches!(e, crate::Error::Internal(_)), "{e}");
    let again = w
        .call(|wmi| {
            Ok(wmi
                .query("SELECT Caption FROM Win32_OperatingSystem")?
                .len())
        })
        .unwrap();
    assert_eq!(again, 1);
}

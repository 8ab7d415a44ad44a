//! The identification slots: at most [`PER_UID`] jobs per uid and
//! [`AT_ONCE`] in all hold a blocking thread for a caller's identification
//! (`/proc` reads; the wait for a digest holds none). The uid's slot is
//! taken first: a connection waiting for it holds no global slot, so a
//! caller that connects in a loop spends its own slots and no one else's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::Semaphore;

/// Identification jobs holding a thread, per uid.
pub const PER_UID: usize = 4;

/// Identification jobs holding a thread, in all.
pub const AT_ONCE: usize = 64;

/// `f` on the blocking pool, in a slot of `uid`'s and one of the
/// process's; `None`: the pool or the slots are gone.
pub(super) async fn blocking<R: Send + 'static>(
    uid: Option<u32>,
    f: impl FnOnce() -> R + Send + 'static,
) -> Option<R> {
    let (all, own) = take_slots(uid).await?;
    tokio::task::spawn_blocking(move || {
        let _slots = (all, own);
        f()
    })
    .await
    .ok()
}

/// A slot of `uid`'s, then one of the process's: the uid's first, so a
/// connection waiting for its uid's slot holds nothing of anyone else's,
/// and one uid holds at most [`PER_UID`] of the [`AT_ONCE`] global slots
/// however many connections it opens.
async fn take_slots(
    uid: Option<u32>,
) -> Option<(
    tokio::sync::OwnedSemaphorePermit,
    tokio::sync::OwnedSemaphorePermit,
)> {
    let own = uid_slots(uid).acquire_owned().await.ok()?;
    let all = slots().clone().acquire_owned().await.ok()?;
    Some((all, own))
}

fn slots() -> &'static Arc<Semaphore> {
    static ALL: OnceLock<Arc<Semaphore>> = OnceLock::new();
    ALL.get_or_init(|| Arc::new(Semaphore::new(AT_ONCE)))
}

/// The slots of one uid (callers without credentials share one set).
fn uid_slots(uid: Option<u32>) -> Arc<Semaphore> {
    static BY_UID: Mutex<Option<HashMap<Option<u32>, Arc<Semaphore>>>> = Mutex::new(None);
    let mut g = BY_UID.lock().unwrap_or_else(|p| p.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    if map.len() >= 1024 {
        // Sets nobody holds or waits for.
        map.retain(|_, s| Arc::strong_count(s) > 1 || s.available_permits() < PER_UID);
    }
    map.entry(uid)
        .or_insert_with(|| Arc::new(Semaphore::new(PER_UID)))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_uid_cannot_hold_every_global_slot() {
        // One uid opens many more connections than there are global
        // slots, and none of its jobs ends (a hash that takes long).
        let hog = Some(3_999_999_001);
        let (tx, _) = tokio::sync::broadcast::channel::<()>(1);
        let mut held = Vec::new();
        for _ in 0..(AT_ONCE + 16) {
            let mut stop = tx.subscribe();
            held.push(tokio::spawn(async move {
                let _slots = take_slots(hog).await;
                let _ = stop.recv().await;
            }));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Another uid still gets its slots at once.
        let other = tokio::time::timeout(Duration::from_secs(1), take_slots(Some(3_999_999_002)))
            .await
            .expect("another uid's identification waited for the hog's slots");
        assert!(other.is_some());
        drop(other);
        tx.send(()).unwrap();
        for h in held {
            h.await.unwrap();
        }
    }
}

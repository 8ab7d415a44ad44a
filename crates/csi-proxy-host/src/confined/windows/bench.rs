//! The ways PathExists can open an entry, one at a time, for the bench of
//! the fast path (`benches/confined_fast_path.rs`: what its final-path
//! proof costs, and the walk it saves).

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// `OBJ_DONT_REPARSE` open of the whole path plus the final-path
    /// proof (what PathExists does first).
    FastProven,
    /// The same open without the proof.
    FastUnproven,
    /// The component walk (each parent opened and checked, pinned),
    /// then the entry.
    Walk,
}

pub fn open(root: &RootHandle, p: &Located, way: Way) -> Result<bool> {
    Ok(match way {
        Way::FastProven => matches!(root.open_proven(p.rel_str(), &probe_open()), Ok(Some(_))),
        Way::FastUnproven => {
            let how = nt::Open {
                dont_reparse: true,
                ..probe_open()
            };
            nt::open_relative(root.raw(), p.rel_str(), &how).is_ok()
        }
        Way::Walk => {
            let chain = walk_parents(root, p)?;
            let name = p.name().expect("not a root");
            nt::open_relative(last_raw(root, &chain), name, &probe_open()).is_ok()
        }
    })
}

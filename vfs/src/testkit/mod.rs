//! Shared test machinery for every `Vfs` backend: the contract suite and a
//! wrapper that interrupts a sequence of operations at a chosen step.

mod before_open;
#[cfg(not(madsim))]
mod bounds;
pub mod contract;
mod counting;
mod interrupt;

pub use before_open::BeforeOpen;
#[cfg(not(madsim))]
pub use bounds::raw_fsync_bandwidth;
pub use counting::{Counting, Counts};
pub use interrupt::Interrupting;

/// Expands to one async test per contract check, each on a fresh volume.
///
/// `$make` is evaluated once per test and must yield `(Arc<dyn Vfs>, guard)`,
/// where the guard keeps the volume alive (a temp dir, say) until the test ends.
#[macro_export]
macro_rules! vfs_contract_tests {
    ($(#[$attr:meta])* make = $make:expr) => {
        $crate::vfs_contract_tests!(@each [$(#[$attr])*] $make;
            write_read_round_trip,
            error_kinds,
            paths_outside_the_volume_are_rejected,
            read_dir_is_sorted_and_typed,
            rename_replaces_the_target,
            exclusive_create_has_one_winner,
            claim_has_one_winner,
            claim_redrive_recognises_own_win,
            atomic_replace_readers_see_whole_versions,
            atomic_replace_interrupted_leaves_old_or_new,
            converge_remove_reaches_end_state_after_any_interruption,
            envelope_errors_are_reported_as_invalid_data
        );
    };
    (@each $attrs:tt $make:expr; $($name:ident),*) => {
        $( $crate::vfs_contract_tests!(@one $attrs $make; $name); )*
    };
    (@one [$(#[$attr:meta])*] $make:expr; $name:ident) => {
        $(#[$attr])*
        async fn $name() {
            let (vfs, _guard) = $make;
            $crate::testkit::contract::$name(vfs).await;
        }
    };
}

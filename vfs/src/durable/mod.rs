//! Durable-file primitives: the only ways kaas changes persisted state.
//!
//! Each is built on the [`Vfs`](crate::Vfs) trait alone and answers one of the
//! three review questions by construction:
//! - [`atomic_replace`]: a whole new version appears by one same-directory
//!   rename, so readers see the old or the new file, never a mix;
//! - [`claim`]: an exclusive create whose winner proves its win by reading its
//!   token back;
//! - [`converge_remove`]: a delete that cannot be atomic, so it is idempotent
//!   and reports whether its end state was reached, for the caller to re-drive;
//! - [`envelope`]: a version and checksum around every metadata file, so a
//!   torn, truncated or foreign file is detected and named.

mod claim;
pub mod envelope;
mod names;
mod remove;
mod replace;

pub use claim::{
    Claim, ClaimToken, claim, claim_noting_creation, create_slot, fill_slot, make_durable,
    read_claim,
};
pub use envelope::{EnvelopeError, open_envelope, seal};
pub use names::{is_nfs_silly_rename, is_temp_name, temp_name};
pub use remove::{Removal, converge_remove};
pub use replace::{atomic_replace, sweep_temps};

//! The partition log on the shared volume.
//!
//! ```text
//! topics/<topic id>/topic.meta
//! topics/<topic id>/<partition>/
//!     epoch-<e>                     claim of leader epoch e (exclusive create)
//!     manifest-<e>                  written only by epoch e's leader (atomic replace)
//!     <base offset>-<e>.log         segments of epoch e, append-only
//!     <base offset>-<e>.index       sparse offset index, written at roll
//!     <base offset>-<e>.timeindex   sparse time index, written at roll
//! topics/names/<name>@<g>           claim generations: which topic id holds the name
//! ```

pub mod audit;
pub mod batch;
pub(crate) mod codecs;
pub mod config_defs;
pub mod epochs;
pub mod fence;
pub mod manifest;
pub mod names;
pub mod partition;
pub mod producers;
pub mod records;
pub mod scan;
pub mod staging;
pub mod topic;
pub mod topic_config;
pub(crate) mod verify;

pub use partition::{LogConfig, LogError, PartitionLog};

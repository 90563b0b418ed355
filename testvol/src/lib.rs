//! A test volume that loses power.
//!
//! [`Journal`] applies every change to a backing directory at once (so
//! reads are plain reads) and remembers how to take back each change that
//! is not durable yet: written bytes until their file is fsynced, creates,
//! unlinks, renames, mkdirs and rmdirs until their directory is fsynced.
//! [`Journal::power_cut`] takes back what is pending, as a machine that
//! lost power would lose it, optionally keeping a seeded random part of
//! it: any subset of the pending pages of a file (torn writes land in any
//! order) and a prefix of the pending metadata changes (a journalling
//! filesystem commits them in order).
//!
//! This is the core of the FUSE volume (`fuser`) that mounts it for real
//! processes; the mount is the next step.

mod journal;

pub use journal::{CutReport, Journal, PAGE};

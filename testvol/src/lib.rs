//! A test volume that loses power, and behaves like several NFS clients.
//!
//! [`Journal`] applies every change to a backing directory at once (so
//! reads are plain reads) and remembers how to take back each change that
//! is not durable yet: written bytes until their file is fsynced, creates,
//! unlinks, renames, mkdirs and rmdirs until their directory is fsynced.
//! A power cut takes back what is pending, as a machine that lost power
//! would lose it, optionally keeping a seeded random part of it: any
//! subset of the pending pages of a file (torn writes land in any order)
//! and a prefix of the pending metadata changes (a journalling filesystem
//! commits them in order).
//!
//! [`volume::Volume`] is what several FUSE mounts ([`mount::Mount`], with
//! `fuser`) share: each mount is one client host with its own kernel
//! caches; a file a mount unlinks while it has it open is renamed to
//! `.nfs…` until its last close there; a handle whose file another mount
//! removed or replaced answers ESTALE. The `testvol` binary mounts it and
//! takes commands on a control socket ([`control`]).
//!
//! A test tool: never part of the broker or its image.
//!
//! | module | what it is |
//! |---|---|
//! | `journal` | what is not durable yet, and how a power cut takes it back ([`Journal`]) |
//! | [`volume`] | the state the mounts share: the journal, inode numbers, open handles, faults |
//! | [`mount`] | one FUSE mount: one client host, with its own caches |
//! | [`control`] | the control socket's commands (cut power, faults, counters) |
//! | `main.rs` | the `testvol` binary: mounts the volume, serves the control socket |

// A test tool the simulator never runs: it is the filesystem under the
// broker (std::fs on the backing directory) and serves the kernel from
// system threads, which the broker's own rules forbid.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

pub mod control;
mod journal;
pub mod mount;
pub mod volume;

pub use journal::{CutReport, Journal, PAGE};

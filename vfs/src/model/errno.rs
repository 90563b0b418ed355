//! NFS errors as the model produces them, and how they reach callers.

use std::io;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Errno {
    NoEnt,
    Exist,
    NotEmpty,
    Busy,
    Stale,
    Io,
    NoSpc,
    /// A quota (user, group or project) is exhausted.
    DQuot,
    NotDir,
    IsDir,
    Inval,
    /// A handle used by a process whose host has crashed since.
    Dead,
    /// A write through a handle opened read-only.
    BadF,
}

impl Errno {
    pub fn kind(self) -> io::ErrorKind {
        match self {
            Errno::NoEnt => io::ErrorKind::NotFound,
            Errno::Exist => io::ErrorKind::AlreadyExists,
            Errno::NotEmpty => io::ErrorKind::DirectoryNotEmpty,
            Errno::Busy => io::ErrorKind::ResourceBusy,
            Errno::Stale => io::ErrorKind::StaleNetworkFileHandle,
            Errno::Io | Errno::Dead => io::ErrorKind::Other,
            Errno::NoSpc => io::ErrorKind::StorageFull,
            Errno::DQuot => io::ErrorKind::QuotaExceeded,
            Errno::NotDir => io::ErrorKind::NotADirectory,
            Errno::IsDir => io::ErrorKind::IsADirectory,
            Errno::Inval => io::ErrorKind::InvalidInput,
            Errno::BadF => io::ErrorKind::PermissionDenied,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Errno::NoEnt => "ENOENT",
            Errno::Exist => "EEXIST",
            Errno::NotEmpty => "ENOTEMPTY",
            Errno::Busy => "EBUSY",
            Errno::Stale => "ESTALE",
            Errno::Io => "EIO",
            Errno::NoSpc => "ENOSPC",
            Errno::DQuot => "EDQUOT",
            Errno::NotDir => "ENOTDIR",
            Errno::IsDir => "EISDIR",
            Errno::Inval => "EINVAL",
            Errno::Dead => "host crashed",
            Errno::BadF => "EBADF",
        }
    }

    pub(crate) fn to_io(self, host: u32, op: &str, path: &str) -> io::Error {
        io::Error::new(
            self.kind(),
            format!("{op} {path} (nfs host {host}): {}", self.name()),
        )
    }
}

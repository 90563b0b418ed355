//! Volume-relative paths.
//!
//! Every `Vfs` path is relative to the volume root and made only of plain
//! names, so no caller can reach outside the volume by accident (`..`, an
//! absolute path) and every backend resolves the same string the same way.
//! The empty path names the root itself.

use std::io;
use std::path::{Component, Path};

/// Rejects paths that are absolute, contain `.`/`..`, or are not UTF-8.
pub fn check(path: &Path) -> io::Result<()> {
    for component in path.components() {
        match component {
            Component::Normal(name) if name.to_str().is_some() => {}
            Component::Normal(_) => return Err(invalid(path, "is not valid UTF-8")),
            Component::ParentDir => return Err(invalid(path, "escapes the volume root (`..`)")),
            Component::CurDir => return Err(invalid(path, "contains `.`")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(invalid(
                    path,
                    "is absolute; volume paths are relative to the data directory",
                ));
            }
        }
    }
    Ok(())
}

/// The parent directory of a checked path (the empty path for top-level names).
pub fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

/// The last component of a checked, non-root path.
pub fn file_name(path: &Path) -> io::Result<&str> {
    path.file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| invalid(path, "has no file name"))
}

fn invalid(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("volume path {path:?} {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_relative_paths() {
        for ok in ["", "a", "topics/abc/0/00000000000000000000-1.log"] {
            check(Path::new(ok)).unwrap();
        }
    }

    #[test]
    fn rejects_escapes() {
        for bad in ["/etc/passwd", "../x", "a/../../b", "./a"] {
            let err = check(Path::new(bad)).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}");
            assert!(err.to_string().contains("volume path"), "{err}");
        }
    }

    #[test]
    fn parent_of_top_level_is_root() {
        assert_eq!(parent(Path::new("a")), Path::new(""));
        assert_eq!(parent(Path::new("a/b")), Path::new("a"));
        assert_eq!(file_name(Path::new("a/b")).unwrap(), "b");
        assert!(file_name(Path::new("")).is_err());
    }
}

//! Names the primitives put on the volume next to the files they manage.

/// Temp files start with a dot so listings of real state can skip them, and
/// carry the target's name so the target's single writer can sweep its own.
pub fn temp_name(target: &str, nonce: u64) -> String {
    format!(".{target}.tmp-{nonce:016x}")
}

pub(crate) fn temp_prefix(target: &str) -> String {
    format!(".{target}.tmp-")
}

/// True for a temp file of [`super::atomic_replace`] (never a real state file).
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(".tmp-")
}

/// True for the `.nfsXXXX` name an NFS client gives a file that was unlinked
/// while still open on that host; it disappears at the last close there.
pub fn is_nfs_silly_rename(name: &str) -> bool {
    name.starts_with(".nfs")
}

/// A random 64-bit value from the runtime's RNG (seeded in simulation).
pub(crate) fn nonce() -> u64 {
    madsim::rand::random()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognised_and_attributed() {
        let t = temp_name("assignment", 0xabc);
        assert!(is_temp_name(&t));
        assert!(t.starts_with(&temp_prefix("assignment")));
        assert!(!is_temp_name("assignment"));
        assert!(is_nfs_silly_rename(".nfs00000000001234ab00000001"));
        assert!(!is_nfs_silly_rename("nfs"));
    }
}

//! The data directory's mount, checked at start-up: on NFS, the options
//! that would break the three guarantees kaas relies on (close-to-open,
//! fresh lookups of absent names, writes that fail only when they did
//! not happen) refuse the start, and the version and attribute-cache
//! timeouts are logged. The table in deploy/README.md says why each one
//! matters.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use procfs_core::FromRead;
use procfs_core::process::{MountInfo, MountInfos};

/// The mount a path lives on, as the kernel lists it.
#[derive(Debug, Clone)]
pub struct Mount {
    pub point: PathBuf,
    pub fs_type: String,
    pub source: String,
    options: BTreeMap<String, Option<String>>,
}

/// An option that breaks the contract with the volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub option: &'static str,
    pub why: &'static str,
}

/// The mount holding `path` (absolute, symlinks resolved) in a
/// `/proc/self/mountinfo` text: the entry with the longest mount point
/// that contains it, the last one listed when several mounts stack on the
/// same point.
pub fn find(mountinfo: &[u8], path: &Path) -> Result<Option<Mount>, String> {
    let infos = MountInfos::from_read(mountinfo).map_err(|e| format!("mountinfo: {e}"))?;
    let mut best: Option<&MountInfo> = None;
    for m in infos.0.iter() {
        if path.starts_with(&m.mount_point)
            && best.is_none_or(|b| {
                m.mount_point.components().count() >= b.mount_point.components().count()
            })
        {
            best = Some(m);
        }
    }
    Ok(best.map(|m| {
        // NFS lists its own options (vers, hard, lookupcache...) among the
        // superblock's.
        let options = m
            .mount_options
            .iter()
            .chain(m.super_options.iter())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Mount {
            point: m.mount_point.clone(),
            fs_type: m.fs_type.clone(),
            source: m.mount_source.clone().unwrap_or_default(),
            options,
        }
    }))
}

impl Mount {
    pub fn is_nfs(&self) -> bool {
        self.fs_type == "nfs" || self.fs_type == "nfs4"
    }

    fn option(&self, name: &str) -> Option<&str> {
        self.options.get(name).map(|v| v.as_deref().unwrap_or(""))
    }

    /// The options that break the contract; none off NFS (a local
    /// filesystem gives all three guarantees).
    pub fn violations(&self) -> Vec<Violation> {
        if !self.is_nfs() {
            return Vec::new();
        }
        let mut found = Vec::new();
        if self.option("soft").is_some() || self.option("softerr").is_some() {
            found.push(Violation {
                option: "soft",
                why: "a soft mount fails a request with EIO after timeo x retrans while it may \
                      still reach the server, so a write kaas saw fail can land later and a \
                      write-back error can be lost; mount with hard (the default)",
            });
        }
        if self.option("nocto").is_some() {
            found.push(Violation {
                option: "nocto",
                why: "without close-to-open consistency an open does not revalidate, and a \
                      broker can read a manifest, claim or heartbeat older than the one another \
                      host closed; remove nocto",
            });
        }
        // The kernel shows lookupcache only when it is not the default,
        // `all`.
        match self.option("lookupcache") {
            Some("pos") | Some("positive") | Some("none") => {}
            _ => found.push(Violation {
                option: "lookupcache=all",
                why: "the client believes a cached \"no such file\" until the directory's \
                      attributes expire (up to acdirmax), which can hide the next epoch's claim \
                      from a leader confirming its flush; mount with lookupcache=positive",
            }),
        }
        if let Some(v) = self.old_version() {
            found.push(Violation {
                option: if v.starts_with('4') {
                    "vers=4.0"
                } else {
                    "vers below 4"
                },
                why: "before NFSv4.1 a retransmitted exclusive create can answer \"already \
                      exists\" to its own winner (no sessions, no exactly-once replies), which costs \
                      an epoch at every lost reply, and the client cannot ask for no delegations; \
                      mount with nfsvers=4.1 or 4.2",
            });
        }
        found
    }

    /// What an operator should see in the log about an NFS mount: the
    /// version and the attribute-cache timeouts (the kernel omits those at
    /// their defaults).
    pub fn describe(&self) -> String {
        let get = |name: &str, default: &str| self.option(name).unwrap_or(default).to_string();
        format!(
            "{} {} on {} (vers={} acregmin={} acregmax={} acdirmin={} acdirmax={} lookupcache={} {})",
            self.fs_type,
            self.source,
            self.point.display(),
            get("vers", "?"),
            get("acregmin", "3"),
            get("acregmax", "60"),
            get("acdirmin", "30"),
            get("acdirmax", "60"),
            get("lookupcache", "all"),
            if self.option("soft").is_some() {
                "soft"
            } else {
                "hard"
            },
        )
    }

    /// The version, when it is below 4.1.
    fn old_version(&self) -> Option<String> {
        let v = self.option("vers")?;
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        ((major, minor) < (4, 1)).then(|| v.to_string())
    }
}

/// The NFSv4 lease the server granted the mount at `point`, in seconds,
/// from a `/proc/self/mountstats` text (the kernel's `lease_time=` on the
/// mount's `nfsv4:` line; procfs-core does not parse that line). After a
/// server restart, opens wait out the grace period, which is the lease
/// unless the server sets it apart.
pub fn lease_seconds(mountstats: &str, point: &Path) -> Option<u64> {
    let header = format!(" mounted on {} with fstype nfs", point.display());
    let mut lines = mountstats.lines();
    lines.find(|l| l.starts_with("device ") && l.contains(&header))?;
    lines
        .take_while(|l| !l.starts_with("device "))
        .find_map(|l| l.trim_start().strip_prefix("nfsv4:"))?
        .split(',')
        .find_map(|field| field.trim().strip_prefix("lease_time="))?
        .parse()
        .ok()
}

/// The refusal message for `violations` of the mount holding `data_dir`.
pub fn refusal(data_dir: &Path, mount: &Mount, violations: &[Violation]) -> String {
    let mut msg = format!(
        "kaas: the data directory {} is on the NFS mount {} ({}), and its options break what \
         kaas needs from the volume:\n",
        data_dir.display(),
        mount.point.display(),
        mount.source
    );
    for v in violations {
        msg.push_str(&format!("  - {}: {}\n", v.option, v.why));
    }
    msg.push_str(
        "Fix the mount options (deploy/README.md, \"The volume and its NFS mount options\"), or \
         start with --allow-unsafe-mount to run anyway.",
    );
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:40 / /data rw,relatime shared:20 - nfs4 server:/export rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.2,local_lock=none,addr=10.0.0.1
31 22 0:41 / /soft rw,relatime shared:21 - nfs4 server:/export rw,vers=4.1,soft,nocto,lookupcache=pos,acdirmax=5,proto=tcp,addr=10.0.0.1
32 22 0:42 / /good rw,relatime shared:22 - nfs server:/export rw,vers=4.2,hard,lookupcache=pos,acregmin=1,acregmax=1,acdirmin=1,acdirmax=1,addr=10.0.0.1
33 22 0:43 / /old rw,relatime shared:23 - nfs server:/export rw,vers=3,hard,lookupcache=none,addr=10.0.0.1
34 30 0:44 / /data/inner rw,relatime shared:24 - tmpfs tmpfs rw
";

    fn at(path: &str) -> Mount {
        find(MOUNTINFO.as_bytes(), Path::new(path))
            .unwrap()
            .unwrap()
    }

    #[test]
    fn the_longest_containing_mount_point_wins() {
        assert_eq!(at("/data/topics/t-0").point, Path::new("/data"));
        assert_eq!(at("/data/inner/x").fs_type, "tmpfs");
        assert_eq!(at("/srv/kaas").fs_type, "ext4");
        // A sibling with a common prefix is not a parent.
        assert_eq!(at("/database").point, Path::new("/"));
    }

    #[test]
    fn the_default_lookupcache_is_refused() {
        let m = at("/data/x");
        assert!(m.is_nfs());
        let v = m.violations();
        assert_eq!(
            v.iter().map(|v| v.option).collect::<Vec<_>>(),
            ["lookupcache=all"]
        );
        let msg = refusal(Path::new("/data/x"), &m, &v);
        assert!(msg.contains("lookupcache=positive"), "{msg}");
        assert!(msg.contains("--allow-unsafe-mount"), "{msg}");
    }

    #[test]
    fn soft_and_nocto_are_refused() {
        let v = at("/soft").violations();
        assert_eq!(
            v.iter().map(|v| v.option).collect::<Vec<_>>(),
            ["soft", "nocto"]
        );
    }

    #[test]
    fn a_conforming_mount_passes_and_is_described() {
        let m = at("/good/d");
        assert!(m.violations().is_empty());
        assert_eq!(m.old_version(), None);
        let d = m.describe();
        assert!(d.contains("vers=4.2") && d.contains("acdirmax=1"), "{d}");
        assert!(d.contains("lookupcache=pos") && d.ends_with("hard)"), "{d}");
        // Defaults the kernel leaves out are spelled out.
        assert!(at("/data").describe().contains("acregmin=3"));
    }

    #[test]
    fn versions_before_4_1_are_refused_and_local_filesystems_pass() {
        let old = at("/old");
        assert_eq!(
            old.violations()
                .iter()
                .map(|v| v.option)
                .collect::<Vec<_>>(),
            ["vers below 4"]
        );
        assert_eq!(at("/data").old_version(), None);
        assert!(at("/srv").violations().is_empty());
        assert!(!at("/srv").is_nfs());
    }

    #[test]
    fn the_lease_is_read_from_the_mounts_own_block() {
        let stats = "\
device /dev/sda1 mounted on / with fstype ext4
device server:/export mounted on /other with fstype nfs4 statvers=1.1
\tnfsv4:\tbm0=0xfdffbfff,bm1=0x40f9be3e,bm2=0x60803,acl=0x3,sessions,pnfs=not configured,lease_time=30,lease_expired=0
device 10.77.0.2:/ mounted on /mnt/kaas with fstype nfs4 statvers=1.1
\topts:\trw,vers=4.1,rsize=1048576
\tnfsv4:\tbm0=0xfdffbfff,bm1=0x40f9be3e,bm2=0x60803,acl=0x3,sessions,pnfs=not configured,lease_time=90,lease_expired=0
\tsec:\tflavor=1,pseudoflavor=1
device tmpfs mounted on /tmp with fstype tmpfs
";
        assert_eq!(lease_seconds(stats, Path::new("/mnt/kaas")), Some(90));
        assert_eq!(lease_seconds(stats, Path::new("/other")), Some(30));
        assert_eq!(lease_seconds(stats, Path::new("/tmp")), None);
        assert_eq!(lease_seconds(stats, Path::new("/mnt")), None);
        assert_eq!(lease_seconds("garbage", Path::new("/")), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(find(b"not a mountinfo line\n", Path::new("/")).is_err());
        assert!(find(b"", Path::new("/")).unwrap().is_none());
    }
}

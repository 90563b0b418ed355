//! `kaas fsck`: reads the whole volume, as a new leader would read each
//! partition, and reports what is wrong with the one copy of the data.
//!
//! Findings come in three kinds. Errors are damage: a manifest naming a
//! segment that is gone, a segment shorter than its manifest vouches for,
//! an epoch without its claim below the newest manifest, a file that is
//! not what kaas wrote (a bad envelope, unparsable). Warnings are files
//! nothing refers to that kaas does not remove by itself (a segment no
//! manifest names). Notices are states a running cluster clears on its own
//! (leftover temps of an interrupted replace, staging directories,
//! tombstones of deleted topics, `.nfs` files of handles still open);
//! on a stopped cluster they say a cleanup is pending. Read-only: it opens
//! and lists, it never writes; `--repair` (`repair`) first performs the
//! fixes that are safe on a live cluster.
//!
//! Checked: topics and their partitions (meta, claims, manifests, segments);
//! coordinator slots (group and transaction files, superseded epochs);
//! controller claims, assignments, producer id blocks, security versions
//! and heartbeats, topic name claims and topic config versions
//! (`coordination`); the whole tree for temps and `.nfs` files.

mod coordination;
mod repair;
mod truncate;

pub use repair::{Action, Repairs, repair};
pub use truncate::{Truncation, parse_partition, truncate_damaged};

use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use vfs::Vfs;
use vfs::durable::{is_nfs_silly_rename, is_temp_name};

use crate::layout::{self, STAGING_PREFIX, TOMBSTONE_PREFIX};
use crate::log::audit::{PartitionAudit, audit_partition, unclaimed_epochs};
use crate::log::manifest::parse_segment_file;
use crate::log::topic;
use crate::log::verify;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Notice,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// Volume-relative path of the file or directory.
    pub path: String,
    /// The name of the topic the path lies in, where its meta names it:
    /// paths name topics by id, operators by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    pub what: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub topics: usize,
    pub partitions: usize,
    pub files: usize,
    pub findings: Vec<Finding>,
    /// What `--repair` did before the check, if asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repairs: Option<Repairs>,
}

impl Report {
    fn add(&mut self, severity: Severity, path: &Path, what: impl Into<String>) {
        self.findings.push(Finding {
            severity,
            path: path.display().to_string(),
            topic: None,
            what: what.into(),
        });
    }

    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// Errors or warnings: what exit code 1 means.
    pub fn has_problems(&self) -> bool {
        self.count(Severity::Error) + self.count(Severity::Warning) > 0
    }

    /// The report as an operator reads it.
    pub fn human(&self) -> String {
        let mut out = self
            .repairs
            .as_ref()
            .map(Repairs::human)
            .unwrap_or_default();
        let mut sorted = self.findings.clone();
        sorted.sort_by(|a, b| (a.severity, &a.path).cmp(&(b.severity, &b.path)));
        for f in &sorted {
            let kind = match f.severity {
                Severity::Error => "ERROR  ",
                Severity::Warning => "WARNING",
                Severity::Notice => "notice ",
            };
            match &f.topic {
                Some(t) => out.push_str(&format!("{kind} {} (topic {t}): {}\n", f.path, f.what)),
                None => out.push_str(&format!("{kind} {}: {}\n", f.path, f.what)),
            }
        }
        out.push_str(&format!(
            "{} topics, {} partitions, {} files read: {} errors, {} warnings, {} notices\n",
            self.topics,
            self.partitions,
            self.files,
            self.count(Severity::Error),
            self.count(Severity::Warning),
            self.count(Severity::Notice),
        ));
        out
    }
}

/// What a check reads.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Read back every batch the manifests vouch for and check its CRC:
    /// the whole volume's data, so as slow as reading it all.
    pub verify_records: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            verify_records: true,
        }
    }
}

/// Checks the volume, its records included. An `Err` is a volume that
/// cannot be read at all or is no kaas volume (exit code 2); a part that
/// cannot be read is an error finding.
pub async fn check(vfs: &dyn Vfs) -> io::Result<Report> {
    check_with(vfs, Options::default()).await
}

/// [`check`], reading what `options` say.
pub async fn check_with(vfs: &dyn Vfs, options: Options) -> io::Result<Report> {
    let mut report = Report::default();
    require_volume(vfs).await?;
    walk(vfs, PathBuf::new(), &mut report).await;
    let names = topics(vfs, options, &mut report).await;
    coordination::slots(vfs, &mut report).await;
    coordination::coordination(vfs, &mut report).await;
    name_topics(&mut report, &names);
    Ok(report)
}

/// Fails unless `vfs` is a kaas volume: its top level listable and a
/// cluster id recorded. A directory no broker ever started on (or the empty
/// mount point of an unmounted volume) is no clean kaas volume: "0 errors"
/// there would pass a check of the wrong directory, and a repair there
/// would touch what is not kaas's.
pub async fn require_volume(vfs: &dyn Vfs) -> io::Result<()> {
    vfs.read_dir(Path::new("")).await?;
    if crate::cluster::identity::read(vfs).await?.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "not a kaas volume: no cluster id recorded (cluster/identity/id); is it the right \
             --data-dir, and is the volume mounted there?",
        ));
    }
    Ok(())
}

/// Names the topic of each finding under `topics/<id>`.
fn name_topics(report: &mut Report, names: &std::collections::BTreeMap<String, String>) {
    let prefix = format!("{}/", layout::TOPICS_DIR);
    for f in &mut report.findings {
        let id = f
            .path
            .strip_prefix(&prefix)
            .and_then(|rest| rest.split('/').next());
        f.topic = id.and_then(|id| names.get(id)).cloned();
    }
}

/// Every entry of the tree: temps and `.nfs` files wherever they are.
async fn walk(vfs: &dyn Vfs, root: PathBuf, report: &mut Report) {
    let mut pending = vec![root];
    while let Some(dir) = pending.pop() {
        let entries = match vfs.read_dir(&dir).await {
            Ok(e) => e,
            // Listed by its parent, then removed before it was read: on a
            // live cluster a reaper or a staging sweep is at work, and
            // what is gone is no damage.
            Err(e) if e.kind() == io::ErrorKind::NotFound && !dir.as_os_str().is_empty() => {
                continue;
            }
            Err(e) => {
                report.add(Severity::Error, &dir, format!("cannot list: {e}"));
                continue;
            }
        };
        for e in entries {
            let path = dir.join(&e.name);
            if is_nfs_silly_rename(&e.name) {
                report.add(
                    Severity::Notice,
                    &path,
                    ".nfs file: a file removed while a host still had it open; it goes at that \
                     host's last close (a long-lived one points at a process holding it)",
                );
            } else if is_temp_name(&e.name) {
                report.add(
                    Severity::Notice,
                    &path,
                    "leftover temp of an interrupted atomic replace; its writer sweeps it",
                );
            }
            match e.kind {
                vfs::FileKind::Dir => pending.push(path),
                _ => report.files += 1,
            }
        }
    }
}

/// Checks every topic; returns their names by id.
async fn topics(
    vfs: &dyn Vfs,
    options: Options,
    report: &mut Report,
) -> std::collections::BTreeMap<String, String> {
    let mut names = std::collections::BTreeMap::new();
    let dir = Path::new(layout::TOPICS_DIR);
    let entries = match vfs.read_dir(dir).await {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return names,
        Err(e) => {
            report.add(Severity::Error, dir, format!("cannot list: {e}"));
            return names;
        }
    };
    for e in entries {
        let path = dir.join(&e.name);
        if e.name.starts_with(STAGING_PREFIX) {
            report.add(
                Severity::Notice,
                &path,
                "staging of a topic being created, or abandoned by a creator that died; the \
                 controller sweeps it once its creator is gone",
            );
            continue;
        }
        if e.name.starts_with(TOMBSTONE_PREFIX) {
            report.add(
                Severity::Notice,
                &path,
                "deleted topic whose files are not removed yet; the controller reaps it",
            );
            continue;
        }
        if e.name.starts_with('.') || path == Path::new(layout::NAMES_DIR) {
            continue;
        }
        let meta = match topic::read_meta(vfs, &e.name).await {
            Ok(m) => m,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                report.add(
                    Severity::Error,
                    &path,
                    "topic directory without its meta file: a topic no name leads to",
                );
                continue;
            }
            Err(err) => {
                report.add(
                    Severity::Error,
                    &path,
                    format!("topic meta unreadable: {err}"),
                );
                continue;
            }
        };
        report.topics += 1;
        names.insert(e.name.clone(), meta.name.clone());
        coordination::topic_configs(vfs, &path, report).await;
        for p in 0..meta.partitions {
            report.partitions += 1;
            partition(vfs, &layout::partition_dir(&meta.id, p), options, report).await;
        }
    }
    names
}

async fn partition(vfs: &dyn Vfs, dir: &Path, options: Options, report: &mut Report) {
    let audit = match audit_partition(vfs, dir).await {
        Ok(Some(a)) => a,
        Ok(None) => {
            report.add(
                Severity::Notice,
                dir,
                "no manifest yet: no leader has taken the partition over",
            );
            return;
        }
        Err(e) => {
            report.add(
                Severity::Error,
                dir,
                format!(
                    "manifest unreadable, so the partition is held offline: {e} (manifests are \
                     only ever replaced whole: this is damage, not a write in flight)"
                ),
            );
            return;
        }
    };
    for name in &audit.missing {
        report.add(
            Severity::Error,
            &dir.join(name),
            format!(
                "named by the manifest of epoch {}, but gone: its records are lost",
                audit.epoch
            ),
        );
    }
    for (name, from, to) in audit.given_up() {
        report.add(
            Severity::Notice,
            &dir.join(name),
            format!(
                "offsets {from}..{to} were given up by `kaas fsck --repair --truncate-damaged` \
                 (damaged or gone); reads step over them and they are never handed out again"
            ),
        );
    }
    match unclaimed_epochs(vfs, dir, 1, audit.epoch).await {
        Ok(gaps) if !gaps.is_empty() => report.add(
            Severity::Error,
            dir,
            format!(
                "epochs {gaps:?} have no claim below the newest manifest (epoch {}): a \
                 leader of the epoch before could pass its fence check",
                audit.epoch
            ),
        ),
        Ok(_) => {}
        Err(e) => report.add(
            Severity::Error,
            dir,
            format!("epoch claims unreadable: {e}"),
        ),
    }
    vouched_files(vfs, dir, &audit, options, report).await;
    unnamed_segments(vfs, dir, &audit, report).await;
}

/// Every file the newest manifest vouches for: there, as long as vouched,
/// and (with `verify_records`) readable record by record.
async fn vouched_files(
    vfs: &dyn Vfs,
    dir: &Path,
    audit: &PartitionAudit,
    options: Options,
    report: &mut Report,
) {
    for (name, vouched) in &audit.vouched {
        if audit.missing.contains(name) {
            continue;
        }
        let len = match file_len(vfs, &dir.join(name)).await {
            // Gone since the audit: on a live cluster, a leader that wrote
            // a manifest without it (retention, a takeover sealing an empty
            // segment) removes it. Damage only if the manifest still names it.
            Err(e) if e.kind() == io::ErrorKind::NotFound && superseded(vfs, dir, audit).await => {
                continue;
            }
            len => len,
        };
        match len {
            Ok(len) if len < *vouched => report.add(
                Severity::Error,
                &dir.join(name),
                format!(
                    "{len} bytes, but the manifest of epoch {} vouches for {vouched}: \
                     acknowledged records are lost",
                    audit.epoch
                ),
            ),
            Ok(_) if options.verify_records => {
                let (base, cleaned) = audit
                    .segment_of(name)
                    .unwrap_or((audit.log_start_offset, true));
                match verify(vfs, &dir.join(name), (base, !cleaned), *vouched).await {
                    Ok(None) => {}
                    Err(e)
                        if e.kind() == io::ErrorKind::NotFound
                            && superseded(vfs, dir, audit).await => {}
                    Ok(Some(d)) => report.add(
                        Severity::Error,
                        &dir.join(name),
                        format!(
                            "damaged at position {} (first bad offset {}): {}; these \
                             acknowledged records are answered CORRUPT_MESSAGE, and no takeover \
                             cuts them (the manifest of epoch {} vouches for them); see \
                             deploy/README.md, \"A damaged segment\"",
                            d.position, d.first_bad_offset, d.why, audit.epoch
                        ),
                    ),
                    Err(e) => {
                        report.add(Severity::Error, &dir.join(name), format!("unreadable: {e}"))
                    }
                }
            }
            Ok(_) => {}
            Err(e) => report.add(Severity::Error, &dir.join(name), format!("unreadable: {e}")),
        }
    }
}

/// Segments on the volume the newest manifest does not name.
async fn unnamed_segments(vfs: &dyn Vfs, dir: &Path, audit: &PartitionAudit, report: &mut Report) {
    let listing = match vfs.read_dir(dir).await {
        Ok(l) => l,
        Err(e) => {
            report.add(Severity::Error, dir, format!("cannot list: {e}"));
            return;
        }
    };
    for e in listing {
        let Some((id, "log")) = parse_segment_file(&e.name) else {
            continue;
        };
        if !audit.segments.contains(&e.name) {
            let why = if id.written_in() > audit.epoch {
                "a segment of a newer epoch than the newest manifest: its leader is rolling \
                 or taking over now, or died before naming it"
            } else {
                "a segment the newest manifest does not name: left by a crash between its \
                 creation and the manifest, or a removal that did not finish; not removed \
                 by `--repair`: a takeover under way may name it, and the partition's next \
                 leader removes what its manifest does not name"
            };
            report.add(Severity::Warning, &dir.join(&e.name), why);
        }
    }
}

/// Whether the partition's newest manifest is no longer the one `audit`
/// read (a leader wrote a newer one since).
async fn superseded(vfs: &dyn Vfs, dir: &Path, audit: &PartitionAudit) -> bool {
    match audit_partition(vfs, dir).await {
        Ok(Some(now)) => !now.same_manifest(audit),
        _ => false,
    }
}

/// The first damage in the `vouched` bytes of the segment at `path`.
async fn verify(
    vfs: &dyn Vfs,
    path: &Path,
    base: (i64, bool),
    vouched: u64,
) -> io::Result<Option<verify::Damage>> {
    let f = vfs.open(path, vfs::OpenOptions::read()).await?;
    let found = verify::first_damage(f.as_ref(), base, vouched).await;
    let _ = f.close().await;
    found
}

/// A file's length, from a fresh open (close-to-open makes it current).
async fn file_len(vfs: &dyn Vfs, path: &Path) -> io::Result<u64> {
    let f = vfs.open(path, vfs::OpenOptions::read()).await?;
    let len = f.stat().await.map(|m| m.len);
    let _ = f.close().await;
    len
}

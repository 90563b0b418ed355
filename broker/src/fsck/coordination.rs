//! The files beside the topics: coordinator slots (epoch claims, group and
//! transaction files), claims (controller epochs, producer id blocks, security
//! versions), assignments and heartbeats. Each must read as what kaas
//! wrote; claims left undecided and files of superseded epochs are named.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use vfs::Vfs;
use vfs::durable::{Claim, ClaimToken, is_nfs_silly_rename, is_temp_name, read_claim};

use super::{Report, Severity};
use crate::cluster::preferred::PreferredLeaders;
use crate::groups::store::GroupRecord;
use crate::layout;
use crate::log::audit::unclaimed_epochs;
use crate::security::{AclSet, Credentials};
use crate::slot_files::{self, SlotRecord};
use crate::txn_store::record::TxnRecord;

/// Entries of `dir` that kaas names (temps and `.nfs` files are the
/// walk's); `None` if there is no such directory.
async fn names(vfs: &dyn Vfs, dir: &Path, report: &mut Report) -> Option<Vec<String>> {
    match vfs.read_dir(dir).await {
        Ok(entries) => Some(
            entries
                .into_iter()
                .map(|e| e.name)
                .filter(|n| !is_temp_name(n) && !is_nfs_silly_rename(n))
                .collect(),
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            report.add(Severity::Error, dir, format!("cannot list: {e}"));
            None
        }
    }
}

/// Every coordinator slot's group and transaction files.
pub(super) async fn slots(vfs: &dyn Vfs, report: &mut Report) {
    let groups = Path::new(layout::GROUPS_DIR);
    for slot in names(vfs, groups, report).await.unwrap_or_default() {
        let dir = groups.join(&slot);
        // (kind, key hash) -> every epoch with a file.
        let mut epochs: BTreeMap<(&str, String), Vec<u32>> = BTreeMap::new();
        let mut newest_claim = 0;
        for name in names(vfs, &dir, report).await.unwrap_or_default() {
            let path = dir.join(&name);
            if let Some(e) = layout::parse_epoch_claim(&name) {
                // Only a decided claim's takeover may have fenced below
                // it; an undecided one's failed at its claim, and the next
                // takeover fences instead.
                if claim(vfs, &path, Payload::Any, report).await {
                    newest_claim = newest_claim.max(e);
                }
                continue;
            }
            let found = if let Some((hash, epoch)) = slot_files::parse_name::<TxnRecord>(&name) {
                slot_file::<TxnRecord>(vfs, &path, hash, report).await;
                Some(("transaction", hash.to_owned(), epoch))
            } else if let Some((hash, epoch)) = slot_files::parse_name::<GroupRecord>(&name) {
                slot_file::<GroupRecord>(vfs, &path, hash, report).await;
                Some(("group", hash.to_owned(), epoch))
            } else {
                report.add(
                    Severity::Warning,
                    &path,
                    "not a group or transaction file: kaas did not write it here",
                );
                None
            };
            if let Some((kind, hash, epoch)) = found {
                epochs.entry((kind, hash)).or_default().push(epoch);
            }
        }
        // A takeover fences every epoch below its own, as a partition's
        // does: a gap would let the coordinator of the epoch before pass
        // its fence check.
        match unclaimed_epochs(vfs, &dir, 1, newest_claim).await {
            Ok(gaps) if !gaps.is_empty() => report.add(
                Severity::Error,
                &dir,
                format!(
                    "coordinator epochs {gaps:?} have no claim below the newest ({newest_claim}): \
                     a coordinator of the epoch before could pass its fence check"
                ),
            ),
            Ok(_) => {}
            Err(e) => report.add(
                Severity::Error,
                &dir,
                format!("epoch claims unreadable: {e}"),
            ),
        }
        for ((kind, hash), mut all) in epochs {
            all.sort_unstable();
            let newest = all.pop().unwrap_or_default();
            for old in all {
                let prefix = match kind {
                    "transaction" => TxnRecord::PREFIX,
                    _ => GroupRecord::PREFIX,
                };
                report.add(
                    Severity::Warning,
                    &layout::slot_file_in(&dir, prefix, &hash, old),
                    format!(
                        "{kind} file of a superseded coordinator epoch (epoch {newest} is newer): \
                         never read again; a save interrupted before it removed this one left it"
                    ),
                );
            }
        }
    }
}

/// A slot file must read, and hold the key its name hashes.
async fn slot_file<T: SlotRecord>(vfs: &dyn Vfs, path: &Path, hash: &str, report: &mut Report) {
    match slot_files::read_at::<T>(vfs, path).await {
        Ok(Some(r)) if slot_files::hash(r.key()) != hash => report.add(
            Severity::Error,
            path,
            format!(
                "holds {:?}, whose files are named by another hash: its coordinator cannot \
                 load it",
                r.key()
            ),
        ),
        Ok(_) => {}
        Err(e) => report.add(Severity::Error, path, format!("unreadable: {e}")),
    }
}

/// What a claim's payload must be.
#[derive(Clone, Copy)]
enum Payload {
    /// Not read beyond the claim (producer id blocks, topic configs).
    Any,
    /// A broker id (controller claims).
    BrokerId,
    Credentials,
    Acls,
    Preferred,
    Quotas,
}

/// Claims of the cluster, producer id blocks and security versions, the
/// assignments and the heartbeats.
pub(super) async fn coordination(vfs: &dyn Vfs, report: &mut Report) {
    let cluster = Path::new(layout::CLUSTER_DIR);
    for name in names(vfs, cluster, report).await.unwrap_or_default() {
        let path = cluster.join(&name);
        if name.starts_with(layout::CONTROLLER_PREFIX) {
            claim(vfs, &path, Payload::BrokerId, report).await;
        } else if name.starts_with(&format!("{}-", crate::cluster::preferred::NAME)) {
            claim(vfs, &path, Payload::Preferred, report).await;
        } else if name.starts_with(&format!("{}-", crate::quota::doc::NAME)) {
            claim(vfs, &path, Payload::Quotas, report).await;
        } else if let Some(epoch) = name
            .strip_prefix(layout::ASSIGNMENT_PREFIX)
            .and_then(|e| e.parse().ok())
        {
            if let Err(e) = crate::cluster::assignment::read(vfs, epoch).await {
                report.add(Severity::Error, &path, format!("unreadable: {e}"));
            }
        }
    }
    // Topic name claims: a torn generation hides which topic holds a name.
    let topic_names = Path::new(layout::NAMES_DIR);
    for name in names(vfs, topic_names, report).await.unwrap_or_default() {
        claim(vfs, &topic_names.join(name), Payload::Any, report).await;
    }
    let producers = Path::new(layout::PRODUCERS_DIR);
    for name in names(vfs, producers, report).await.unwrap_or_default() {
        claim(vfs, &producers.join(name), Payload::Any, report).await;
    }
    let security = Path::new(layout::SECURITY_DIR);
    for name in names(vfs, security, report).await.unwrap_or_default() {
        let payload = if name.starts_with(&format!("{}-", layout::CREDENTIALS_DOC)) {
            Payload::Credentials
        } else if name.starts_with(&format!("{}-", layout::ACLS_DOC)) {
            Payload::Acls
        } else {
            continue;
        };
        claim(vfs, &security.join(name), payload, report).await;
    }
    let brokers = Path::new(layout::BROKERS_DIR);
    for name in names(vfs, brokers, report).await.unwrap_or_default() {
        if crate::cluster::id_claim::is_claim_name(&name) {
            claim(vfs, &brokers.join(&name), Payload::Any, report).await;
            continue;
        }
        let Ok(id) = name.parse::<u32>() else {
            continue;
        };
        if let Err(e) = crate::cluster::heartbeat::read(vfs, id).await {
            report.add(
                Severity::Error,
                &brokers.join(&name),
                format!("unreadable: {e}"),
            );
        }
    }
}

/// A topic's config versions (`config-<n>`, claims holding the configs).
pub(super) async fn topic_configs(vfs: &dyn Vfs, topic: &Path, report: &mut Report) {
    for name in names(vfs, topic, report).await.unwrap_or_default() {
        if name.starts_with(layout::CONFIG_PREFIX) {
            claim(vfs, &topic.join(name), Payload::Any, report).await;
        }
    }
}

/// Checks a claim; true if it is decided (someone holds it).
async fn claim(vfs: &dyn Vfs, path: &Path, payload: Payload, report: &mut Report) -> bool {
    let reader = ClaimToken::fresh("fsck");
    let body = match read_claim(vfs, path, &reader).await {
        Ok(Claim::Lost { payload, .. }) => payload,
        Ok(Claim::Won) => return true,
        Ok(Claim::Undecided(why)) => {
            report.add(
                Severity::Notice,
                path,
                format!(
                    "undecided claim ({why}): its claimant stopped between creating and \
                     filling it, or is doing so now; the number it claims is skipped"
                ),
            );
            return false;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return false,
        Err(e) => {
            report.add(Severity::Error, path, format!("unreadable claim: {e}"));
            return false;
        }
    };
    let bad = match payload {
        Payload::Any => None,
        Payload::BrokerId => std::str::from_utf8(&body)
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
            .is_none()
            .then(|| "names no broker id".to_owned()),
        Payload::Credentials => serde_json::from_slice::<Credentials>(&body)
            .err()
            .map(|e| format!("credentials do not parse: {e}")),
        Payload::Acls => serde_json::from_slice::<AclSet>(&body)
            .err()
            .map(|e| format!("ACLs do not parse: {e}")),
        Payload::Preferred => serde_json::from_slice::<PreferredLeaders>(&body)
            .err()
            .map(|e| format!("preferred leaders do not parse: {e}")),
        Payload::Quotas => serde_json::from_slice::<crate::quota::ClientQuotas>(&body)
            .err()
            .map(|e| format!("client quotas do not parse: {e}")),
    };
    if let Some(why) = bad {
        report.add(Severity::Error, path, why);
    }
    true
}

//! Topics on the volume: identified by id, found by name.
//!
//! ```text
//! topics/<topic id>/topic.meta          name, id, partition count (atomic replace)
//! topics/<topic id>/<p>/manifest-0000000000   the empty log every partition starts from
//! topics/names/<name>@<g>               generations of the claim naming the id
//!                                       that holds the name (see `names`)
//! ```
//! A topic's directories are built under a staging directory that names
//! its creator (`staging`: who may sweep one) and renamed into place in one
//! step, so nobody ever sees a half-created topic, and
//! partitions are never created later: opening a partition that does not
//! exist is an error. The name is claimed last, by exclusive create: of two
//! creators of one name, one wins and the other removes its staged topic.
//! A recreated topic gets a new id and so never meets the old one's files.
//!
//! Deleting a topic renames `topics/<id>` to `topics/.tombstone-<id>` (one
//! atomic step: the end state "deleted" is reached there, and leaders are
//! fenced because their epoch claims are no longer at their paths), then
//! releases the name. Removing the tombstone's files cannot be atomic on
//! NFS (open handles leave `.nfs` files, unlinks are interrupted), so
//! [`reap_tombstones`] re-drives it until nothing is left.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use super::names::{self, NameClaim};
use serde::{Deserialize, Serialize};
use vfs::Vfs;
use vfs::durable::{ClaimToken, claim, converge_remove};

use super::manifest::Manifest;
use super::staging::{self, Creator, STAGING_PREFIX, TOMBSTONE_PREFIX};

#[cfg(madsim)]
#[path = "../historical/stuck_topic_delete.rs"]
mod stuck_topic_delete;

pub(crate) use crate::layout::TOPICS_DIR;
pub use crate::layout::{partition_dir, topic_dir};
/// How often a create starts over with a fresh staging directory after a
/// sweeper took its staging (its creator looked gone: paused past the
/// grace, say).
const STAGING_ATTEMPTS: u32 = 3;
const META_KIND: &str = "topic-meta";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    pub id: String,
    pub name: String,
    pub partitions: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("invalid topic name {0:?}: {1}")]
    InvalidName(String, &'static str),
    #[error("topic {0:?} already exists")]
    Exists(String),
    #[error("the number of partitions must be between 1 and 100000, not {0}")]
    InvalidPartitions(u32),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Kafka's rules: 1 to 249 of `[a-zA-Z0-9._-]`, and not `.` or `..`.
pub(crate) fn validate_name(name: &str) -> Result<(), TopicError> {
    let bad = |why| Err(TopicError::InvalidName(name.to_owned(), why));
    if name.is_empty() || name.len() > 249 {
        return bad("must be 1 to 249 characters");
    }
    if name == "." || name == ".." {
        return bad("cannot be '.' or '..'");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("may only contain ASCII letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

/// A random topic id in UUID form, from the runtime's (seeded) RNG.
pub(crate) fn new_topic_id() -> String {
    let v: u128 = madsim::rand::random();
    // Version 4, variant 1, as Kafka's Uuid.randomUuid() produces.
    let v = (v & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let h = format!("{v:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The creator of topics made outside a broker process (tests, tools):
/// never live in an assignment, so a controller may sweep its staging
/// directories after the grace.
pub(crate) const TOOL: Creator = Creator {
    broker: u32::MAX,
    incarnation: 0,
};

/// Creates a topic with `partitions` empty partitions and returns its meta.
pub async fn create_topic(
    vfs: &dyn Vfs,
    name: &str,
    partitions: u32,
) -> Result<TopicMeta, TopicError> {
    create_topic_with(vfs, &TOOL, name, partitions, &BTreeMap::new()).await
}

/// Like [`create_topic`], made by `creator` (this broker process), with
/// config overrides stored as the topic's first config version (already
/// validated by the caller).
pub async fn create_topic_with(
    vfs: &dyn Vfs,
    creator: &Creator,
    name: &str,
    partitions: u32,
    overrides: &BTreeMap<String, String>,
) -> Result<TopicMeta, TopicError> {
    validate_name(name)?;
    if !(1..=100_000).contains(&partitions) {
        return Err(TopicError::InvalidPartitions(partitions));
    }
    #[cfg(madsim)]
    let attempts = if crate::historical::on("staging-sweep") {
        1
    } else {
        STAGING_ATTEMPTS
    };
    #[cfg(not(madsim))]
    let attempts = STAGING_ATTEMPTS;
    let mut attempt = 0;
    let meta = loop {
        attempt += 1;
        let meta = TopicMeta {
            id: new_topic_id(),
            name: name.to_owned(),
            partitions,
        };
        match build_and_place(vfs, creator, &meta, overrides).await {
            Ok(true) => break meta,
            Ok(false) if attempt < attempts => {
                tracing::info!(name, id = %meta.id, attempt, "the staging directory was swept (its creator looked gone); starting over");
            }
            Ok(false) => {
                return Err(io::Error::new(
                    io::ErrorKind::Interrupted,
                    format!(
                        "topic {name:?}: its staging directory was swept {attempt} times \
                         while it was being created; try again"
                    ),
                )
                .into());
            }
            Err(e) => return Err(e.into()),
        }
    };
    // Belt and braces: a placed topic must be whole before it gets a name
    // (a staging directory is only ever taken by a rename now, but a
    // volume that lost files must not hand out a broken topic).
    if let Err(why) = staged_whole(vfs, &meta).await {
        abandon(vfs, &meta.id).await;
        return Err(io::Error::new(
            io::ErrorKind::Interrupted,
            format!("topic {name:?} was damaged while it was being created ({why}); try again"),
        )
        .into());
    }
    vfs::fault_point!(vfs, "create-topic.placed");
    let token = ClaimToken::fresh(&meta.id);
    let mut result = names::claim_name(vfs, name, &meta.id, &token).await;
    if let Ok(NameClaim::Taken(holder)) = &result {
        // The name may still point at a deleted topic whose name release
        // was interrupted: finish that release, then claim once more.
        if release_stale_name(vfs, name, holder).await? {
            result = names::claim_name(vfs, name, &meta.id, &token).await;
        }
    }
    match result {
        Ok(NameClaim::Won) => {
            tracing::info!(name, id = %meta.id, partitions, "topic created");
            Ok(meta)
        }
        Ok(NameClaim::Taken(_)) => {
            abandon(vfs, &meta.id).await;
            Err(TopicError::Exists(name.to_owned()))
        }
        // The claim's outcome is unknown (the volume failed part-way): it
        // may have won, and other brokers may already lead the topic and
        // acknowledge writes to it under the name. Abandoning it here lost
        // such writes (the simulator, seed 230). It stays in place: named
        // if the claim won, else unnamed, and an unnamed topic is never
        // led (only its space is wasted).
        Err(e) => match names::holder(vfs, name).await {
            Ok(Some(holder)) if holder == meta.id => {
                tracing::info!(name, id = %meta.id, partitions, "topic created");
                Ok(meta)
            }
            _ => {
                tracing::warn!(name, id = %meta.id, error = %e, "topic name claim undecided; the topic is left in place");
                Err(e.into())
            }
        },
    }
}

/// Stages `meta` under its creator's name and renames it into place.
/// `Ok(false)`: a sweeper took the staging directory first (the two
/// renames share their source, so exactly one happened); the caller may
/// start over with a fresh id.
async fn build_and_place(
    vfs: &dyn Vfs,
    creator: &Creator,
    meta: &TopicMeta,
    overrides: &BTreeMap<String, String>,
) -> io::Result<bool> {
    let staging = staging::topic_staging(Path::new(TOPICS_DIR), &meta.id, creator);
    if let Err(e) = stage(vfs, &staging, meta, overrides).await {
        discard(vfs, &staging).await;
        return match e.kind() {
            // The staging directory vanished under us: swept.
            io::ErrorKind::NotFound => Ok(false),
            _ => Err(e),
        };
    }
    vfs::fault_point!(vfs, "create-topic.staged");
    match vfs.rename(&staging, &topic_dir(&meta.id)).await {
        Ok(()) => Ok(true),
        // Either our rename happened and its reply was lost, or the
        // sweeper's rename came first: the meta at the final path tells.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            vfs::exists_now(vfs, &crate::layout::topic_meta(&meta.id)).await
        }
        Err(e) => {
            discard(vfs, &staging).await;
            Err(e)
        }
    }
}

/// Whether a just-renamed topic has its meta and every partition's first
/// manifest (fresh opens).
async fn staged_whole(vfs: &dyn Vfs, meta: &TopicMeta) -> Result<(), String> {
    match read_meta(vfs, &meta.id).await {
        Ok(m) if m.partitions == meta.partitions => {}
        Ok(m) => {
            return Err(format!(
                "{} partitions of {}",
                m.partitions, meta.partitions
            ));
        }
        Err(e) => return Err(e.to_string()),
    }
    for p in 0..meta.partitions {
        let first = super::manifest::manifest_path(&partition_dir(&meta.id, p), 0);
        match vfs::exists_now(vfs, &first).await {
            Ok(true) => {}
            Ok(false) => return Err(format!("{} is missing", first.display())),
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// A topic that lost its name (or whose claim failed) is turned into a
/// tombstone in one rename, like a deleted topic: the name's readers may
/// still point at it (a claim can be complete and yet have lost to its
/// successor), and a tombstoned id reads as deleted, which frees the name.
/// The reaper removes its files.
async fn abandon(vfs: &dyn Vfs, id: &str) {
    let tombstone = crate::layout::tombstone(id);
    match vfs.rename(&topic_dir(id), &tombstone).await {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(topic_id = id, error = %e, "could not abandon a topic that lost its name; it stays unnamed");
            return;
        }
    }
    reap_tombstone(vfs, id, 1).await;
}

async fn stage(
    vfs: &dyn Vfs,
    staging: &Path,
    meta: &TopicMeta,
    overrides: &BTreeMap<String, String>,
) -> io::Result<()> {
    mkdir_fresh(vfs, staging).await?;
    crate::stored::write_json(vfs, &crate::layout::topic_meta_in(staging), META_KIND, meta).await?;
    if !overrides.is_empty() {
        let json = serde_json::to_vec(overrides).map_err(io::Error::other)?;
        let token = ClaimToken::fresh("creator");
        claim(
            vfs,
            &crate::layout::topic_config_in(staging, 1),
            &token,
            &json,
        )
        .await?;
    }
    for p in 0..meta.partitions {
        let dir = staging.join(p.to_string());
        mkdir_fresh(vfs, &dir).await?;
        Manifest::initial(&meta.id, p).write(vfs, &dir).await?;
    }
    Ok(())
}

/// Makes a directory under a name nobody else uses (a fresh random id):
/// `AlreadyExists` can only be our own mkdir whose reply was lost.
async fn mkdir_fresh(vfs: &dyn Vfs, dir: &Path) -> io::Result<()> {
    match vfs.mkdir(dir).await {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// Best effort now. A staging directory left behind is swept once its
/// creator is gone (`staging`); a named-nowhere topic directory (lost the
/// name race) is left for the controller's sweep of unnamed topics (not
/// written yet).
async fn discard(vfs: &dyn Vfs, dir: &Path) {
    if let Err(e) = converge_remove(vfs, dir).await {
        tracing::warn!(dir = %dir.display(), error = %e, "could not remove an abandoned topic directory yet");
    }
}

/// Unlinks `name` if it points at `holder` and `holder` is no longer a live
/// topic. Returns whether the name was released.
async fn release_stale_name(vfs: &dyn Vfs, name: &str, holder: &str) -> io::Result<bool> {
    match read_meta(vfs, holder).await {
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            tracing::info!(name, holder, "releasing the name of a deleted topic");
            names::release(vfs, name, holder).await
        }
        Err(e) => Err(e),
    }
}

/// Deletes the topic `meta`: after this returns, nobody can open, produce
/// to or fetch from it, and its name can be reused. Idempotent; an
/// interrupted call is completed by calling it again. Files are removed
/// later by [`reap_tombstones`]. The broker that received the DeleteTopics
/// request runs this; two brokers deleting the same topic converge (the
/// rename happens once, the other finds it done) and a name already claimed
/// by a newer topic is left alone (the release names this topic's id).
pub async fn delete_topic(vfs: &dyn Vfs, meta: &TopicMeta) -> io::Result<()> {
    #[cfg(madsim)]
    if crate::historical::on("stuck-topic-delete") {
        return stuck_topic_delete::delete_in_place_once(vfs, meta).await;
    }
    let tombstone = crate::layout::tombstone(&meta.id);
    match vfs.rename(&topic_dir(&meta.id), &tombstone).await {
        Ok(()) => {}
        // Already renamed (by an earlier, interrupted call, or a lost reply).
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    vfs::fault_point!(vfs, "delete-topic.tombstoned");
    // Only this topic's hold on the name is released; a name that already
    // belongs to someone else, or to nobody, stays as it is. The rename
    // was the deletion: a release the volume refuses (full, EIO) is done
    // by the next creator of the name, who finds its holder gone, so the
    // delete is answered as done.
    if let Err(e) = names::release(vfs, &meta.name, &meta.id).await {
        tracing::warn!(topic = meta.name, topic_id = meta.id, error = %e, "topic deleted; its name is released by its next creator");
    }
    Ok(())
}

/// Re-drives the removal of one deleted topic's tombstone until it is gone
/// or `attempts` passes failed. The deleter runs this right away: it knows
/// the path, while the controller's sweep ([`reap_tombstones`]) finds
/// tombstones through a directory listing that NFS may serve stale for up
/// to a minute.
pub(crate) async fn reap_tombstone(vfs: &dyn Vfs, id: &str, attempts: u32) -> bool {
    let path = crate::layout::tombstone(id);
    for attempt in 1..=attempts {
        match converge_remove(vfs, &path).await {
            Ok(r) if r.is_gone() => return true,
            Ok(r) => tracing::debug!(topic_id = id, left = ?r, "tombstone not gone yet"),
            Err(e) => tracing::debug!(topic_id = id, error = %e, "reaping the tombstone; retrying"),
        }
        if attempt < attempts {
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        }
    }
    false
}

/// Removes what is left of deleted topics and swept staging directories,
/// as far as the volume allows now. Returns the tombstones still pending
/// (open handles somewhere, or `.nfs` files); call again later until it
/// returns none. Staging directories are not touched here: only
/// [`staging::StagingSweep`] may turn one into a tombstone.
pub async fn reap_tombstones(vfs: &dyn Vfs) -> io::Result<Vec<String>> {
    let mut pending = Vec::new();
    for entry in vfs.read_dir(Path::new(TOPICS_DIR)).await? {
        if !entry.name.starts_with(TOMBSTONE_PREFIX) {
            continue;
        }
        let path = Path::new(TOPICS_DIR).join(&entry.name);
        // One tombstone the volume refuses today must not stop the others.
        match converge_remove(vfs, &path).await {
            Ok(r) if r.is_gone() => {}
            Ok(_) => pending.push(entry.name),
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "reaping; retrying next tick");
                pending.push(entry.name);
            }
        }
    }
    Ok(pending)
}

/// The topic currently holding `name`, if any (fresh reads).
pub async fn lookup(vfs: &dyn Vfs, name: &str) -> io::Result<Option<TopicMeta>> {
    validate_name(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let Some(id) = names::holder(vfs, name).await? else {
        return Ok(None);
    };
    match read_meta(vfs, &id).await {
        Ok(meta) => Ok(Some(meta)),
        // Deleted; the name's release is still to be re-driven.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A topic's meta, with `partitions` counting partitions added after its
/// creation too.
pub(crate) async fn read_meta(vfs: &dyn Vfs, id: &str) -> io::Result<TopicMeta> {
    let path = crate::layout::topic_meta(id);
    let mut meta: TopicMeta = crate::stored::read_json(vfs, &path, META_KIND)
        .await?
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no topic meta", path.display()),
            )
        })?;
    // Added partitions are directories renamed into place one by one; the
    // count is the first one missing (an open by path is fresh).
    while partition_exists(vfs, id, meta.partitions).await? {
        meta.partitions += 1;
    }
    Ok(meta)
}

async fn partition_exists(vfs: &dyn Vfs, id: &str, partition: u32) -> io::Result<bool> {
    let first_manifest = super::manifest::manifest_path(&partition_dir(id, partition), 0);
    vfs::exists_now(vfs, &first_manifest).await
}

/// Grows `meta`'s topic to `total` partitions: each new partition is staged
/// in the topic directory and renamed into place, so it appears whole or
/// not at all; a partition someone else added meanwhile is left as it is.
/// `live` (the assignment's brokers) decides which partition stagings of
/// other adders are abandoned (see `sweep_partition_stagings`).
pub(crate) async fn add_partitions(
    vfs: &dyn Vfs,
    creator: &Creator,
    live: &dyn staging::LiveBrokers,
    meta: &TopicMeta,
    total: u32,
) -> io::Result<()> {
    sweep_partition_stagings(vfs, &meta.id, live).await;
    for p in meta.partitions..total {
        let mut attempt = 0;
        while !add_partition(vfs, creator, meta, p).await? {
            attempt += 1;
            if attempt >= STAGING_ATTEMPTS {
                return Err(io::Error::new(
                    io::ErrorKind::Interrupted,
                    format!(
                        "partition {p} of {:?}: its staging directory was swept {attempt} \
                         times; try again",
                        meta.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Places partition `p`: `Ok(true)` once it exists (ours or someone
/// else's), `Ok(false)` when a sweeper took our staging first.
async fn add_partition(
    vfs: &dyn Vfs,
    creator: &Creator,
    meta: &TopicMeta,
    p: u32,
) -> io::Result<bool> {
    let staging = staging::partition_staging(&topic_dir(&meta.id), p, creator);
    mkdir_fresh(vfs, &staging).await?;
    let placed = match Manifest::initial(&meta.id, p).write(vfs, &staging).await {
        Ok(()) => {
            vfs::fault_point!(vfs, "create-partitions.staged");
            vfs.rename(&staging, &partition_dir(&meta.id, p)).await
        }
        Err(e) => Err(e),
    };
    match placed {
        Ok(()) => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::DirectoryNotEmpty | io::ErrorKind::AlreadyExists
            ) =>
        {
            discard(vfs, &staging).await;
            Ok(true)
        }
        // A lost reply to our rename, a sweeper's rename first, or the
        // staging swept while we wrote it: the partition's first manifest
        // (fresh open) tells whether it is in place.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            discard(vfs, &staging).await;
            partition_exists(vfs, &meta.id, p).await
        }
        Err(e) => {
            discard(vfs, &staging).await;
            Err(e)
        }
    }
}

/// Takes the partition stagings of topic `id` whose creator is not live in
/// `live`, and removes what earlier takes left. Only adders of partitions
/// run this, and only on a topic they are growing, so a listing of every
/// topic directory is never needed. A creator wrongly taken for gone (a
/// broker the assignment does not list yet) loses a retry, not a file:
/// a take is a rename that competes with the creator's own.
async fn sweep_partition_stagings(vfs: &dyn Vfs, id: &str, live: &dyn staging::LiveBrokers) {
    let dir = topic_dir(id);
    let entries = match vfs.read_dir(&dir).await {
        Ok(e) => e,
        Err(e) => {
            tracing::debug!(topic_id = id, error = %e, "listing partition stagings; skipped");
            return;
        }
    };
    for entry in entries {
        if entry.name.starts_with(TOMBSTONE_PREFIX) {
            let _ = converge_remove(vfs, &dir.join(&entry.name)).await;
        } else if entry.name.starts_with(STAGING_PREFIX)
            && !staging::creator_of(&entry.name).is_some_and(|c| c.is_live(live))
        {
            if let Err(e) = staging::take(vfs, &dir, &entry.name).await {
                tracing::debug!(staging = %entry.name, error = %e, "taking a partition staging; left for the next adder");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kafka_rules() {
        for ok in ["a", "orders.v1", "A_b-9", &"x".repeat(249)] {
            validate_name(ok).unwrap();
        }
        for bad in ["", ".", "..", "a/b", "a b", "ü", &"x".repeat(250)] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn topic_ids_look_like_v4_uuids() {
        let id = new_topic_id();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4", "{id}");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        assert_ne!(id, new_topic_id());
    }
}

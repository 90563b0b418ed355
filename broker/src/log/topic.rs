//! Topics on the volume: identified by id, found by name.
//!
//! ```text
//! topics/<topic id>/topic.meta          name, id, partition count (atomic replace)
//! topics/<topic id>/<p>/manifest-0000000000   the empty log every partition starts from
//! topics/names/<name>                   claim naming the id that holds the name
//! ```
//! A topic's directories are built under `topics/.staging-<id>` and renamed
//! into place in one step, so nobody ever sees a half-created topic, and
//! partitions are never created later: opening a partition that does not
//! exist is an error. The name is claimed last, by exclusive create: of two
//! creators of one name, one wins and the other removes its staged topic.
//! A recreated topic gets a new id and so never meets the old one's files.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vfs::Vfs;
use vfs::durable::{
    Claim, ClaimToken, EnvelopeError, atomic_replace, claim, converge_remove, open_envelope,
    read_claim, seal,
};

use super::manifest::Manifest;

pub const TOPICS_DIR: &str = "topics";
pub const NAMES_DIR: &str = "topics/names";
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

pub fn topic_dir(id: &str) -> PathBuf {
    Path::new(TOPICS_DIR).join(id)
}

pub fn partition_dir(id: &str, partition: u32) -> PathBuf {
    topic_dir(id).join(partition.to_string())
}

fn name_path(name: &str) -> PathBuf {
    Path::new(NAMES_DIR).join(name)
}

/// Kafka's rules: 1 to 249 of `[a-zA-Z0-9._-]`, and not `.` or `..`.
pub fn validate_name(name: &str) -> Result<(), TopicError> {
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
pub fn new_topic_id() -> String {
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

/// Creates a topic with `partitions` empty partitions and returns its meta.
pub async fn create_topic(
    vfs: &dyn Vfs,
    name: &str,
    partitions: u32,
) -> Result<TopicMeta, TopicError> {
    validate_name(name)?;
    if !(1..=100_000).contains(&partitions) {
        return Err(TopicError::InvalidPartitions(partitions));
    }
    let meta = TopicMeta {
        id: new_topic_id(),
        name: name.to_owned(),
        partitions,
    };
    let staging = Path::new(TOPICS_DIR).join(format!(".staging-{}", meta.id));
    if let Err(e) = stage(vfs, &staging, &meta).await {
        discard(vfs, &staging).await;
        return Err(e.into());
    }
    let final_dir = topic_dir(&meta.id);
    if let Err(e) = vfs.rename(&staging, &final_dir).await {
        discard(vfs, &staging).await;
        return Err(e.into());
    }
    let token = ClaimToken::fresh(&meta.id);
    match claim(vfs, &name_path(name), &token, meta.id.as_bytes()).await {
        Ok(Claim::Won) => Ok(meta),
        Ok(Claim::Lost { .. }) => {
            discard(vfs, &final_dir).await;
            Err(TopicError::Exists(name.to_owned()))
        }
        Ok(Claim::Undecided(why)) => {
            discard(vfs, &final_dir).await;
            Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("topic name {name:?} is being created by someone else ({why})"),
            )
            .into())
        }
        Err(e) => {
            discard(vfs, &final_dir).await;
            Err(e.into())
        }
    }
}

async fn stage(vfs: &dyn Vfs, staging: &Path, meta: &TopicMeta) -> io::Result<()> {
    vfs.mkdir(staging).await?;
    let json = serde_json::to_vec(meta).map_err(io::Error::other)?;
    atomic_replace(vfs, &staging.join("topic.meta"), seal(META_KIND, &json)).await?;
    for p in 0..meta.partitions {
        let dir = staging.join(p.to_string());
        vfs.mkdir(&dir).await?;
        Manifest::initial(&meta.id, p).write(vfs, &dir).await?;
    }
    Ok(())
}

/// Best effort now. What is left is a staging or unnamed topic directory
/// that no name points to; the controller's sweep of such directories (with
/// topic deletion) re-drives its removal.
async fn discard(vfs: &dyn Vfs, dir: &Path) {
    if let Err(e) = converge_remove(vfs, dir).await {
        tracing::warn!(dir = %dir.display(), error = %e, "could not remove an abandoned topic directory yet");
    }
}

/// The topic currently holding `name`, if any (fresh reads).
pub async fn lookup(vfs: &dyn Vfs, name: &str) -> io::Result<Option<TopicMeta>> {
    validate_name(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let nobody = ClaimToken::fresh("reader");
    let id = match read_claim(vfs, &name_path(name), &nobody).await {
        Ok(Claim::Lost { payload, .. }) => String::from_utf8_lossy(&payload).into_owned(),
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    read_meta(vfs, &id).await.map(Some)
}

pub async fn read_meta(vfs: &dyn Vfs, id: &str) -> io::Result<TopicMeta> {
    let path = topic_dir(id).join("topic.meta");
    let bytes = vfs::read_file(vfs, &path).await?;
    let payload = open_envelope(META_KIND, &bytes).map_err(|e| e.at(path.display()))?;
    serde_json::from_slice(payload)
        .map_err(|e| EnvelopeError::Payload(e.to_string()).at(path.display()))
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

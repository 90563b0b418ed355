//! Topic configs: the overrides of Kafka's defaults, one version per file.
//!
//! Any broker may alter a topic's config, so an update is a read, a change
//! and a write that must not lose a concurrent update. Each version is a
//! new file `topics/<id>/config-<n>` made by exclusive create (`claim`):
//! the writer that loses the race for `n` re-reads and tries `n+1`, which
//! makes the update a compare-and-swap built from the atomic primitive.
//! Readers take the newest complete version (opens by path, fresh).

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use vfs::Vfs;
use vfs::durable::{Claim, ClaimToken, claim, read_claim};

use super::topic::topic_dir;

/// The topic configs kaas honours, with Kafka's defaults.
pub(crate) const DEFAULTS: &[(&str, &str)] = &[
    ("cleanup.policy", "delete"),
    ("max.message.bytes", "1048588"),
    ("retention.bytes", "-1"),
    ("retention.ms", "604800000"),
    ("segment.bytes", "1073741824"),
];

pub(crate) type Overrides = BTreeMap<String, String>;

/// Checks one setting; `Err` says why it is refused.
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    let number = |min: i64| match value.parse::<i64>() {
        Ok(n) if n >= min => Ok(()),
        _ => Err(format!("{name} must be an integer >= {min}, not {value:?}")),
    };
    match name {
        "cleanup.policy" if value == "delete" => Ok(()),
        "cleanup.policy" => Err(format!(
            "cleanup.policy={value} is not supported (only delete)"
        )),
        "max.message.bytes" => number(0),
        "retention.bytes" | "retention.ms" => number(-1),
        "segment.bytes" => number(14),
        _ => Err(format!("unknown topic config {name}")),
    }
}

/// The effective value of every known config, and whether it is a default.
pub(crate) fn effective(overrides: &Overrides) -> Vec<(String, String, bool)> {
    DEFAULTS
        .iter()
        .map(|(k, d)| match overrides.get(*k) {
            Some(v) => ((*k).to_owned(), v.clone(), false),
            None => ((*k).to_owned(), (*d).to_owned(), true),
        })
        .collect()
}

pub(crate) fn get_i64(overrides: &Overrides, name: &str) -> i64 {
    overrides
        .get(name)
        .map(String::as_str)
        .or_else(|| DEFAULTS.iter().find(|(k, _)| *k == name).map(|(_, v)| *v))
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

fn version_path(topic_id: &str, n: u32) -> PathBuf {
    topic_dir(topic_id).join(format!("config-{n:010}"))
}

/// The newest complete version and its number (version 0 = no overrides).
pub async fn read(vfs: &dyn Vfs, topic_id: &str) -> io::Result<(u32, Overrides)> {
    let mut newest = 0;
    while vfs::exists_now(vfs, &version_path(topic_id, newest + 1)).await? {
        newest += 1;
    }
    let reader = ClaimToken::fresh("config-reader");
    for n in (1..=newest).rev() {
        if let Claim::Lost { payload, .. } =
            read_claim(vfs, &version_path(topic_id, n), &reader).await?
        {
            let overrides = serde_json::from_slice(&payload).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("topic config {n}: {e}"))
            })?;
            return Ok((n, overrides));
        }
    }
    Ok((0, Overrides::new()))
}

/// Applies `change` to the newest overrides and stores the result as the
/// next version, retrying on a concurrent update. Returns the new overrides.
pub async fn update(
    vfs: &dyn Vfs,
    topic_id: &str,
    change: impl Fn(&mut Overrides),
) -> io::Result<Overrides> {
    let token = ClaimToken::fresh("config-writer");
    for _ in 0..16 {
        let (n, mut overrides) = read(vfs, topic_id).await?;
        change(&mut overrides);
        let json = serde_json::to_vec(&overrides).map_err(io::Error::other)?;
        if claim(vfs, &version_path(topic_id, n + 1), &token, &json).await? == Claim::Won {
            return Ok(overrides);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::WouldBlock,
        format!("topic {topic_id}: config kept changing under this update"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn concurrent_updates_are_not_lost() {
        let vfs: std::sync::Arc<dyn Vfs> = std::sync::Arc::new(vfs::MemVfs::new());
        for d in ["topics", "topics/t"] {
            vfs.mkdir(std::path::Path::new(d)).await.unwrap();
        }
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let vfs = vfs.clone();
                tokio::spawn(async move {
                    update(vfs.as_ref(), "t", |o| {
                        o.insert(format!("k{i}"), i.to_string());
                    })
                    .await
                    .unwrap()
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let (n, o) = read(vfs.as_ref(), "t").await.unwrap();
        assert_eq!(n, 8);
        assert_eq!(o.len(), 8, "{o:?}");
    }

    #[test]
    fn validates_and_fills_defaults() {
        assert!(validate("retention.ms", "-1").is_ok());
        assert!(validate("retention.ms", "soon").is_err());
        assert!(validate("cleanup.policy", "compact").is_err());
        assert!(validate("unknown.thing", "1").is_err());
        let mut o = Overrides::new();
        o.insert("retention.ms".into(), "1000".into());
        assert_eq!(get_i64(&o, "retention.ms"), 1000);
        assert_eq!(get_i64(&o, "segment.bytes"), 1073741824);
        assert!(
            effective(&o)
                .iter()
                .any(|(k, v, d)| k == "retention.ms" && v == "1000" && !d)
        );
    }
}

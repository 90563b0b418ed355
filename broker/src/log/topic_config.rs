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

use vfs::Vfs;
use vfs::durable::{Claim, ClaimToken, claim, read_claim};

use super::config_defs::{self, ConfigDef};

pub(crate) type Overrides = BTreeMap<String, String>;

/// Checks one setting; `Err` says why it is refused.
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    config_defs::validate(name, value)
}

/// The effective value of every topic config, and whether it is a default.
pub(crate) fn effective(overrides: &Overrides) -> Vec<(&'static ConfigDef, String, bool)> {
    config_defs::TOPIC_CONFIGS
        .iter()
        .map(|d| match overrides.get(d.name) {
            Some(v) => (d, v.clone(), false),
            None => (d, d.default.to_owned(), true),
        })
        .collect()
}

/// A change of one config: a value (`None`: back to the default), or
/// IncrementalAlterConfigs' APPEND and SUBTRACT of comma-separated items of
/// a list config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Set(Option<String>),
    Append(String),
    Subtract(String),
}

fn items(list: &str) -> Vec<&str> {
    list.split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .collect()
}

/// The value `change` gives `name`, from its current value in `overrides`
/// (or its default): `Ok(None)` for back to the default.
pub fn changed_value(
    overrides: &Overrides,
    name: &str,
    change: &Change,
) -> Result<Option<String>, String> {
    let (add, what) = match change {
        Change::Set(v) => return Ok(v.clone()),
        Change::Append(what) => (true, what),
        Change::Subtract(what) => (false, what),
    };
    match config_defs::find(name) {
        Some(d) if d.kind == config_defs::ConfigType::List => {}
        Some(_) => {
            return Err(format!(
                "{name} is not a list: APPEND and SUBTRACT apply to list configs"
            ));
        }
        None => return Err(format!("unknown topic config {name}")),
    }
    let mut list: Vec<&str> = items(value(overrides, name).unwrap_or(""));
    for item in items(what) {
        if add {
            if !list.contains(&item) {
                list.push(item);
            }
        } else {
            list.retain(|i| *i != item);
        }
    }
    Ok(Some(list.join(",")))
}

fn value<'a>(overrides: &'a Overrides, name: &str) -> Option<&'a str> {
    overrides
        .get(name)
        .map(String::as_str)
        .or_else(|| config_defs::find(name).map(|d| d.default))
}

pub(crate) fn get_i64(overrides: &Overrides, name: &str) -> i64 {
    value(overrides, name)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1)
}

fn policy_has(overrides: &Overrides, policy: &str) -> bool {
    value(overrides, "cleanup.policy").is_some_and(|p| p.split(',').any(|i| i.trim() == policy))
}

/// Whether old segments go by time and size: `cleanup.policy` includes
/// `delete`. A compact-only topic keeps the newest record of every key
/// however old.
pub(crate) fn deletes_by_retention(overrides: &Overrides) -> bool {
    policy_has(overrides, "delete")
}

/// The topic's compaction settings, if `cleanup.policy` includes `compact`.
pub(crate) fn compaction(overrides: &Overrides) -> Option<crate::log::partition::CompactionConfig> {
    if !policy_has(overrides, "compact") {
        return None;
    }
    let ratio = value(overrides, "min.cleanable.dirty.ratio")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|r| (0.0..=1.0).contains(r))
        .unwrap_or(0.5);
    Some(crate::log::partition::CompactionConfig {
        min_cleanable_dirty_ratio: ratio,
        min_compaction_lag_ms: get_i64(overrides, "min.compaction.lag.ms").max(0),
        max_compaction_lag_ms: get_i64(overrides, "max.compaction.lag.ms").max(1),
        delete_retention_ms: get_i64(overrides, "delete.retention.ms").max(0),
    })
}

use crate::layout::topic_config as version_path;

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

    #[test]
    fn append_and_subtract_work_on_list_configs_only() {
        let mut o = Overrides::new();
        let append = |v: &str| Change::Append(v.into());
        assert_eq!(
            changed_value(&o, "cleanup.policy", &append("compact")).unwrap(),
            Some("delete,compact".into())
        );
        o.insert("cleanup.policy".into(), "delete, compact".into());
        assert_eq!(
            changed_value(&o, "cleanup.policy", &Change::Subtract("delete".into())).unwrap(),
            Some("compact".into())
        );
        assert_eq!(
            changed_value(&o, "cleanup.policy", &append("compact")).unwrap(),
            Some("delete,compact".into())
        );
        assert!(changed_value(&o, "retention.ms", &append("5")).is_err());
        assert!(changed_value(&o, "no.such.config", &append("5")).is_err());
        assert_eq!(
            changed_value(&o, "retention.ms", &Change::Set(None)).unwrap(),
            None
        );
        // Emptied: no retention by time or size either.
        let emptied = changed_value(
            &o,
            "cleanup.policy",
            &Change::Subtract("delete,compact".into()),
        );
        assert_eq!(emptied.unwrap(), Some(String::new()));
        assert!(validate("cleanup.policy", "").is_ok());
        o.insert("cleanup.policy".into(), String::new());
        assert!(!deletes_by_retention(&o));
    }

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
        assert!(validate("cleanup.policy", "compact").is_ok());
        assert!(validate("unknown.thing", "1").is_err());
        let mut o = Overrides::new();
        o.insert("retention.ms".into(), "1000".into());
        assert_eq!(get_i64(&o, "retention.ms"), 1000);
        assert_eq!(get_i64(&o, "segment.bytes"), 1073741824);
        assert!(deletes_by_retention(&o));
        o.insert("cleanup.policy".into(), "compact".into());
        assert!(!deletes_by_retention(&o));
        o.insert("cleanup.policy".into(), "compact, delete".into());
        assert!(deletes_by_retention(&o));
        assert!(
            effective(&o)
                .iter()
                .any(|(k, v, d)| k.name == "retention.ms" && v == "1000" && !d)
        );
    }
}

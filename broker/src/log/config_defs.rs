//! Every topic config Kafka knows, with its type, default, the broker
//! config it falls back to, a line of documentation, and what it does in
//! kaas: tools (Kafka Connect, Schema Registry, Streams, Terraform
//! providers, admin UIs) set and read these, and a refused or missing name
//! breaks them even where kaas has nothing to do with the setting.

/// Kafka's `ConfigEntry.ConfigType` codes (DescribeConfigs v3+).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// What a value must be.
#[derive(Clone, Copy, Debug)]
enum Check {
    /// An integer at least this.
    AtLeast(i64),
    Bool,
    /// A number in `[0, 1]`.
    Ratio,
    /// One of these.
    OneOf(&'static [&'static str]),
    /// A comma-separated list of these (empty allowed).
    ListOf(&'static [&'static str]),
    /// Anything (replica lists of throttles, which kaas has none of).
    Any,
}

/// Whether kaas acts on a config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    Honoured,
    /// Accepted and reported; the reason it changes nothing in kaas.
    None(&'static str),
}

#[derive(Clone, Copy, Debug)]
pub struct ConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    pub default: &'static str,
    /// The broker config a topic without an override takes its value from.
    pub broker_synonym: Option<&'static str>,
    pub doc: &'static str,
    pub effect: Effect,
    check: Check,
}

const REPLICAS: &str =
    "kaas keeps one copy of each partition on the shared volume and does not replicate";
const NO_TIERING: &str = "kaas keeps the whole log on the shared volume and has no remote tier";
const FSYNC: &str = "kaas makes every acknowledged batch durable before it answers";
const NO_INDEX_TUNING: &str = "kaas sizes its segment indexes itself";

macro_rules! def {
    ($name:literal, $kind:ident, $default:expr, $synonym:expr, $check:expr, $effect:expr, $doc:literal) => {
        ConfigDef {
            name: $name,
            kind: ConfigType::$kind,
            default: $default,
            broker_synonym: $synonym,
            doc: $doc,
            effect: $effect,
            check: $check,
        }
    };
}

const LONG_MAX: &str = "9223372036854775807";
const CODECS: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

/// Kafka 4's topic configs (and the 3.x ones tools still set), by name.
pub const TOPIC_CONFIGS: &[ConfigDef] = &[
    def!(
        "cleanup.policy",
        List,
        "delete",
        Some("log.cleanup.policy"),
        Check::ListOf(&["delete", "compact"]),
        Effect::Honoured,
        "delete: old segments go by retention.ms and retention.bytes. compact: the newest record of every key is kept (the leader compacts sealed segments). compact,delete: both."
    ),
    def!(
        "compression.gzip.level",
        Int,
        "-1",
        Some("compression.gzip.level"),
        Check::AtLeast(-1),
        Effect::None("kaas does not recompress batches"),
        "gzip level used when the broker recompresses."
    ),
    def!(
        "compression.lz4.level",
        Int,
        "9",
        Some("compression.lz4.level"),
        Check::AtLeast(1),
        Effect::None("kaas does not recompress batches"),
        "lz4 level used when the broker recompresses."
    ),
    def!(
        "compression.type",
        String,
        "producer",
        Some("compression.type"),
        Check::OneOf(CODECS),
        Effect::Honoured,
        "The codec batches are stored with. kaas stores batches as the producer compressed them, which is what producer means; other values are accepted and not applied (kaas does not recompress)."
    ),
    def!(
        "compression.zstd.level",
        Int,
        "3",
        Some("compression.zstd.level"),
        Check::AtLeast(-131072),
        Effect::None("kaas does not recompress batches"),
        "zstd level used when the broker recompresses."
    ),
    def!(
        "delete.retention.ms",
        Long,
        "86400000",
        Some("log.cleaner.delete.retention.ms"),
        Check::AtLeast(0),
        Effect::Honoured,
        "How long a compacted topic keeps delete markers (tombstones), counted from the tombstone's timestamp."
    ),
    def!(
        "file.delete.delay.ms",
        Long,
        "60000",
        Some("log.segment.delete.delay.ms"),
        Check::AtLeast(0),
        Effect::None("kaas removes a segment once the manifest that drops it is durable"),
        "Delay before a segment dropped from the log is removed from disk."
    ),
    def!(
        "flush.messages",
        Long,
        LONG_MAX,
        Some("log.flush.interval.messages"),
        Check::AtLeast(1),
        Effect::None(FSYNC),
        "Messages between forced flushes of the log."
    ),
    def!(
        "flush.ms",
        Long,
        LONG_MAX,
        Some("log.flush.interval.ms"),
        Check::AtLeast(0),
        Effect::None(FSYNC),
        "Time between forced flushes of the log."
    ),
    def!(
        "follower.replication.throttled.replicas",
        List,
        "",
        Some("follower.replication.throttled.replicas"),
        Check::Any,
        Effect::None(REPLICAS),
        "Replicas whose follower replication is throttled."
    ),
    def!(
        "index.interval.bytes",
        Int,
        "4096",
        Some("log.index.interval.bytes"),
        Check::AtLeast(0),
        Effect::None(NO_INDEX_TUNING),
        "Bytes of log between offset index entries."
    ),
    def!(
        "leader.replication.throttled.replicas",
        List,
        "",
        Some("leader.replication.throttled.replicas"),
        Check::Any,
        Effect::None(REPLICAS),
        "Replicas whose leader-side replication is throttled."
    ),
    def!(
        "local.retention.bytes",
        Long,
        "-2",
        Some("log.local.retention.bytes"),
        Check::AtLeast(-2),
        Effect::None(NO_TIERING),
        "Bytes kept on local disk when a remote tier holds the rest."
    ),
    def!(
        "local.retention.ms",
        Long,
        "-2",
        Some("log.local.retention.ms"),
        Check::AtLeast(-2),
        Effect::None(NO_TIERING),
        "Time a segment stays on local disk when a remote tier holds the rest."
    ),
    def!(
        "max.compaction.lag.ms",
        Long,
        LONG_MAX,
        Some("log.cleaner.max.compaction.lag.ms"),
        Check::AtLeast(1),
        Effect::Honoured,
        "Longest a record stays uncompacted."
    ),
    def!(
        "max.message.bytes",
        Int,
        "1048588",
        Some("message.max.bytes"),
        Check::AtLeast(0),
        Effect::Honoured,
        "Largest record batch the topic accepts; a larger one gets MESSAGE_TOO_LARGE."
    ),
    def!(
        "message.downconversion.enable",
        Boolean,
        "true",
        Some("log.message.downconversion.enable"),
        Check::Bool,
        Effect::None("kaas serves record batches of format v2 only and never down-converts"),
        "Whether fetches of old formats are down-converted (removed in Kafka 4)."
    ),
    def!(
        "message.timestamp.after.max.ms",
        Long,
        "3600000",
        Some("log.message.timestamp.after.max.ms"),
        Check::AtLeast(0),
        Effect::None("kaas stores the producer's timestamps without checking them"),
        "How far in the future a record's timestamp may be."
    ),
    def!(
        "message.timestamp.before.max.ms",
        Long,
        LONG_MAX,
        Some("log.message.timestamp.before.max.ms"),
        Check::AtLeast(0),
        Effect::None("kaas stores the producer's timestamps without checking them"),
        "How far in the past a record's timestamp may be."
    ),
    def!(
        "message.timestamp.type",
        String,
        "CreateTime",
        Some("log.message.timestamp.type"),
        Check::OneOf(&["CreateTime"]),
        Effect::Honoured,
        "Which timestamp records carry. kaas keeps the producer's (CreateTime); LogAppendTime is refused rather than ignored."
    ),
    def!(
        "min.cleanable.dirty.ratio",
        Double,
        "0.5",
        Some("log.cleaner.min.cleanable.ratio"),
        Check::Ratio,
        Effect::Honoured,
        "Share of the log not yet compacted before the cleaner runs."
    ),
    def!(
        "min.compaction.lag.ms",
        Long,
        "0",
        Some("log.cleaner.min.compaction.lag.ms"),
        Check::AtLeast(0),
        Effect::Honoured,
        "Shortest time a record stays uncompacted."
    ),
    def!(
        "min.insync.replicas",
        Int,
        "1",
        Some("min.insync.replicas"),
        Check::AtLeast(1),
        Effect::None(REPLICAS),
        "Replicas that must have a write before acks=all is answered; in kaas the volume's one durable copy is every replica."
    ),
    def!(
        "preallocate",
        Boolean,
        "false",
        Some("log.preallocate"),
        Check::Bool,
        Effect::None("kaas never preallocates segment files"),
        "Whether new segment files are preallocated."
    ),
    def!(
        "remote.log.copy.disable",
        Boolean,
        "false",
        None,
        Check::Bool,
        Effect::None(NO_TIERING),
        "Stops copying segments to the remote tier."
    ),
    def!(
        "remote.log.delete.on.disable",
        Boolean,
        "false",
        None,
        Check::Bool,
        Effect::None(NO_TIERING),
        "Deletes the remote copy when tiering is turned off."
    ),
    def!(
        "remote.storage.enable",
        Boolean,
        "false",
        None,
        Check::OneOf(&["false"]),
        Effect::None(NO_TIERING),
        "Whether the topic uses a remote tier; kaas refuses true."
    ),
    def!(
        "retention.bytes",
        Long,
        "-1",
        Some("log.retention.bytes"),
        Check::AtLeast(-1),
        Effect::Honoured,
        "Largest size a partition keeps before its oldest segments go (-1: no limit)."
    ),
    def!(
        "retention.ms",
        Long,
        "604800000",
        Some("log.retention.ms"),
        Check::AtLeast(-1),
        Effect::Honoured,
        "How long a segment is kept after its newest record (-1: forever)."
    ),
    def!(
        "segment.bytes",
        Int,
        "1073741824",
        Some("log.segment.bytes"),
        Check::AtLeast(14),
        Effect::Honoured,
        "Size at which the active segment rolls."
    ),
    def!(
        "segment.index.bytes",
        Int,
        "10485760",
        Some("log.index.size.max.bytes"),
        Check::AtLeast(4),
        Effect::None(NO_INDEX_TUNING),
        "Size of a segment's offset index."
    ),
    def!(
        "segment.jitter.ms",
        Long,
        "0",
        Some("log.roll.jitter.ms"),
        Check::AtLeast(0),
        Effect::None(
            "kaas rolls each partition at segment.ms without jitter: its partitions roll at the cleaner's rounds, not all at once"
        ),
        "Random jitter subtracted from segment.ms."
    ),
    def!(
        "segment.ms",
        Long,
        "604800000",
        Some("log.roll.ms"),
        Check::AtLeast(1),
        Effect::Honoured,
        "Age at which the active segment rolls (checked at each cleaner round), so that a compacted or time-retained topic's recent records become cleanable."
    ),
    def!(
        "unclean.leader.election.enable",
        Boolean,
        "false",
        Some("unclean.leader.election.enable"),
        Check::Bool,
        Effect::None(REPLICAS),
        "Whether a replica that missed writes may become leader."
    ),
];

pub fn find(name: &str) -> Option<&'static ConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// Checks one setting; `Err` says why it is refused (INVALID_CONFIG).
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    let Some(def) = find(name) else {
        return Err(format!("unknown topic config {name}"));
    };
    let ok = match def.check {
        Check::AtLeast(min) => value.trim().parse::<i64>().is_ok_and(|n| n >= min),
        Check::Bool => matches!(value.trim().to_ascii_lowercase().as_str(), "true" | "false"),
        Check::Ratio => value
            .trim()
            .parse::<f64>()
            .is_ok_and(|r| (0.0..=1.0).contains(&r)),
        Check::OneOf(allowed) => allowed.contains(&value.trim()),
        // An empty list is allowed: an empty cleanup.policy (Kafka 4.1,
        // KIP-1161) deletes nothing and compacts nothing.
        Check::ListOf(allowed) => value
            .split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .all(|i| allowed.contains(&i)),
        Check::Any => true,
    };
    if ok {
        return Ok(());
    }
    Err(match def.check {
        Check::AtLeast(min) => format!("{name} must be an integer >= {min}, not {value:?}"),
        Check::Bool => format!("{name} must be true or false, not {value:?}"),
        Check::Ratio => format!("{name} must be a number from 0 to 1, not {value:?}"),
        Check::OneOf(allowed) => format!(
            "{name} must be one of {}, not {value:?}",
            allowed.join(", ")
        ),
        Check::ListOf(allowed) => format!(
            "{name} must be a list of {}, not {value:?}",
            allowed.join(", ")
        ),
        Check::Any => unreachable!("Any accepts every value"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_is_sorted_unique_and_its_defaults_pass_their_own_checks() {
        let names: Vec<&str> = TOPIC_CONFIGS.iter().map(|d| d.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        for d in TOPIC_CONFIGS {
            assert_eq!(validate(d.name, d.default), Ok(()), "{}", d.name);
        }
    }

    #[test]
    fn values_are_checked_by_type() {
        assert!(validate("compression.type", "zstd").is_ok());
        assert!(validate("compression.type", "brotli").is_err());
        assert!(validate("cleanup.policy", "compact,delete").is_ok());
        assert!(validate("cleanup.policy", "archive").is_err());
        assert!(validate("min.insync.replicas", "2").is_ok());
        assert!(validate("min.insync.replicas", "0").is_err());
        assert!(validate("min.cleanable.dirty.ratio", "1.5").is_err());
        assert!(validate("preallocate", "yes").is_err());
        assert!(validate("message.timestamp.type", "LogAppendTime").is_err());
        assert!(validate("remote.storage.enable", "true").is_err());
        assert!(validate("no.such.config", "1").is_err());
    }
}

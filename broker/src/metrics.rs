//! The broker's metrics, served in the Prometheus text format on the
//! health listener (`/metrics`). One registry per broker (the simulator
//! runs several in one process); the metrics only observe, nothing reads
//! them back to decide anything.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use vfs::observed::{Observer, Op};

/// Request and volume latencies: 100 us to 30 s.
const SECONDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// Takeovers: 1 ms to 2 minutes.
const TAKEOVER_SECONDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

struct Inner {
    registry: Registry,
    #[cfg(not(madsim))]
    process: crate::process_metrics::ProcessCollector,
    api: ApiMetrics,
    leadership: LeadershipMetrics,
    volume: VolumeMetrics,
    log: LogMetrics,
}

/// Requests, their bytes, connections and refusals.
struct ApiMetrics {
    requests: IntCounterVec,
    request_seconds: HistogramVec,
    bytes_in: IntCounterVec,
    bytes_out: IntCounterVec,
    connections: IntGauge,
    damaged_reads: IntCounter,
    connections_refused: IntCounter,
    fenced: IntCounterVec,
    throttle_seconds: HistogramVec,
}

impl ApiMetrics {
    fn new(r: &Registry) -> Self {
        Self {
            requests: counter(
                r,
                "requests_total",
                "Requests answered, by API and by the error code of the response (NONE when \
             every part succeeded; otherwise one count per distinct code in it)",
                &["api", "error"],
            ),
            request_seconds: histogram(
                r,
                "request_duration_seconds",
                "From a request's decoding to its response's encoding",
                &["api"],
                SECONDS,
            ),
            bytes_in: counter(
                r,
                "topic_bytes_in_total",
                "Record bytes appended by produce requests",
                &["topic"],
            ),
            bytes_out: counter(
                r,
                "topic_bytes_out_total",
                "Record bytes returned by fetch requests",
                &["topic"],
            ),
            connections: gauge(
                r,
                "connections",
                "Open connections on the Kafka listeners (clients and other brokers)",
            ),
            damaged_reads: single(
                r,
                "damaged_batch_reads_total",
                "Reads that met a stored batch failing its CRC or size check, answered \
             CORRUPT_MESSAGE: damage to the one copy (run kaas fsck)",
            ),
            connections_refused: single(
                r,
                "connections_refused_total",
                "Client connections refused by --max-connections or --max-connections-per-ip",
            ),
            fenced: counter(
                r,
                "fence_refusals_total",
                "Requests refused because this broker's epoch was superseded",
                &["api"],
            ),
            throttle_seconds: histogram(
                r,
                "quota_throttle_seconds",
                "Throttles imposed by client quotas (producer_byte_rate, consumer_byte_rate): \
             the time a client's connection is muted, by quota",
                &["quota"],
                SECONDS,
            ),
        }
    }
}

/// What this broker leads and its takeovers.
struct LeadershipMetrics {
    partitions_led: IntGauge,
    partitions_offline: IntGauge,
    coordinator_slots_led: IntGauge,
    takeovers: IntCounterVec,
    takeover_seconds: HistogramVec,
}

impl LeadershipMetrics {
    fn new(r: &Registry) -> Self {
        Self {
            partitions_led: gauge(r, "partitions_led", "Partitions this broker leads"),
            partitions_offline: gauge(
                r,
                "partitions_offline",
                "Partitions assigned to this broker and held offline because their files on \
             the volume are damaged (an unreadable manifest, a missing segment: run kaas \
             fsck) or the volume was too full for a takeover",
            ),
            coordinator_slots_led: gauge(
                r,
                "coordinator_slots_led",
                "Group and transaction coordinator slots this broker holds",
            ),
            takeovers: counter(
                r,
                "takeovers_total",
                "Takeovers at a new epoch of a partition or a coordinator slot, by outcome",
                &["what", "outcome"],
            ),
            takeover_seconds: histogram(
                r,
                "takeover_duration_seconds",
                "Opening a partition or coordinator slot at its new epoch: the claim, fencing \
             the epochs before it, recovering the state",
                &["what"],
                TAKEOVER_SECONDS,
            ),
        }
    }
}

/// Calls to the shared volume and its room.
struct VolumeMetrics {
    volume_size: IntGauge,
    volume_free: IntGauge,
    volume_full: IntGauge,
    volume_seconds: HistogramVec,
    volume_errors: IntCounterVec,
    nfs_files: IntCounter,
    lost_replies: IntCounterVec,
    slow_calls: IntCounterVec,
}

impl VolumeMetrics {
    fn new(r: &Registry) -> Self {
        Self {
            volume_size: gauge(
                r,
                "volume_size_bytes",
                "Size of the shared volume as the mount reports it (statvfs; 0 where it cannot tell)",
            ),
            volume_free: gauge(
                r,
                "volume_free_bytes",
                "Bytes of the shared volume still available to the broker (statvfs; 0 where it \
             cannot tell, see kaas_volume_size_bytes)",
            ),
            volume_full: gauge(
                r,
                "volume_full",
                "1 while the volume has no room: a partition led here failed its last write with \
             ENOSPC or EDQUOT, or no byte is available; produce requests then fail with \
             KAFKA_STORAGE_ERROR",
            ),
            volume_seconds: histogram(
                r,
                "volume_op_duration_seconds",
                "Calls to the shared volume (write_and_sync is a produce flush cycle's write \
             and commit)",
                &["op"],
                SECONDS,
            ),
            volume_errors: counter(
                r,
                "volume_errors_total",
                "Failed calls to the shared volume, by errno (ENOENT and EEXIST are often the \
             expected answer, e.g. to a claim that is free)",
                &["op", "errno"],
            ),
            nfs_files: single(
                r,
                "volume_nfs_files_seen_total",
                "Silly-renamed .nfsXXXX files seen in directory listings",
            ),
            lost_replies: counter(
                r,
                "volume_lost_replies_total",
                "Calls to the shared volume that failed with a retransmission's answer (EEXIST \
             to a create, ENOENT to a rename) although they had taken effect: their reply \
             was lost, and the caller found its own result",
                &["op"],
            ),
            slow_calls: counter(
                r,
                "volume_slow_calls_total",
                "Calls to the shared volume that took 5 s or longer (each is also logged with \
             its file): on NFS, a server waiting out a dead host's lease before it lets \
             another host change a file that host held",
                &["op"],
            ),
        }
    }
}

/// Deletion, retention and compaction backlogs and passes.
struct LogMetrics {
    deletion_backlog: IntGauge,
    retention_backlog: IntGauge,
    compactions: IntCounterVec,
    compaction_bytes: IntCounterVec,
    compaction_seconds: HistogramVec,
    compaction_compressed: IntCounter,
}

impl LogMetrics {
    fn new(r: &Registry) -> Self {
        Self {
            deletion_backlog: gauge(
                r,
                "deletion_backlog_topics",
                "Deleted topics whose files are not removed yet",
            ),
            retention_backlog: gauge(
                r,
                "retention_backlog_files",
                "Files of segments the partitions this broker leads dropped from their manifests \
             (retention, DeleteRecords, a takeover's leftovers) whose removal has not \
             succeeded yet (retried at every retention pass)",
            ),
            compactions: counter(
                r,
                "compaction_passes_total",
                "Compaction passes over a partition, by outcome (ok, failed)",
                &["outcome"],
            ),
            compaction_bytes: counter(
                r,
                "compaction_bytes_total",
                "Segment bytes compaction passes read (the segments they replaced) and wrote \
             (the cleaned segments)",
                &["direction"],
            ),
            compaction_seconds: histogram(
                r,
                "compaction_duration_seconds",
                "One compaction pass over a partition, from its plan to the old files' removal",
                &[],
                TAKEOVER_SECONDS,
            ),
            compaction_compressed: single(
                r,
                "compaction_compressed_batches_kept_total",
                "Compressed batches of compacted topics kept whole because a pass could not read \
             them (they expand past 64 MiB, or do not decompress): their keys are not \
             deduplicated",
            ),
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn counter(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid counter");
    r.register(Box::new(c.clone())).expect("registered once");
    c
}

fn histogram(r: &Registry, name: &str, help: &str, labels: &[&str], b: &[f64]) -> HistogramVec {
    let opts = HistogramOpts::new(name, help).buckets(b.to_vec());
    let h = HistogramVec::new(opts, labels).expect("valid histogram");
    r.register(Box::new(h.clone())).expect("registered once");
    h
}

fn gauge(r: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("valid gauge");
    r.register(Box::new(g.clone())).expect("registered once");
    g
}

fn single(r: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid counter");
    r.register(Box::new(c.clone())).expect("registered once");
    c
}

impl Metrics {
    /// One registry shared by every component no broker has handed its
    /// own (tests, the fuzz harness): building a registry costs more than
    /// answering a small request, and nothing reads these back.
    pub fn unobserved() -> Self {
        static SHARED: std::sync::OnceLock<Metrics> = std::sync::OnceLock::new();
        SHARED.get_or_init(Metrics::new).clone()
    }

    pub fn new() -> Self {
        let r = Registry::new_custom(Some("kaas".into()), None).expect("valid prefix");
        let inner = Inner {
            api: ApiMetrics::new(&r),
            leadership: LeadershipMetrics::new(&r),
            volume: VolumeMetrics::new(&r),
            log: LogMetrics::new(&r),
            registry: r,
            #[cfg(not(madsim))]
            process: crate::process_metrics::ProcessCollector::new(),
        };
        // Zero until they happen, rather than absent: a dashboard or an
        // alert on them sees 0, not "no data".
        inner.api.fenced.with_label_values(&["Produce"]);
        for op in [Op::Open, Op::Rename] {
            inner.volume.lost_replies.with_label_values(&[op.name()]);
        }
        for outcome in ["ok", "failed"] {
            inner.log.compactions.with_label_values(&[outcome]);
        }
        for direction in ["read", "written"] {
            inner.log.compaction_bytes.with_label_values(&[direction]);
        }
        for quota in ["producer_byte_rate", "consumer_byte_rate"] {
            inner.api.throttle_seconds.with_label_values(&[quota]);
        }
        for what in ["partition", "coordinator_slot"] {
            inner.leadership.takeover_seconds.with_label_values(&[what]);
            for outcome in ["ok", "failed"] {
                inner
                    .leadership
                    .takeovers
                    .with_label_values(&[what, outcome]);
            }
        }
        inner.log.compaction_seconds.with_label_values::<&str>(&[]);
        for op in [
            Op::Open,
            Op::Stat,
            Op::Rename,
            Op::Unlink,
            Op::Mkdir,
            Op::Rmdir,
            Op::ReadDir,
            Op::SyncDir,
            Op::Read,
            Op::Write,
            Op::Fsync,
            Op::WriteAndSync,
            Op::FileStat,
            Op::Close,
        ] {
            inner.volume.volume_seconds.with_label_values(&[op.name()]);
        }
        // Which build answers: 1, labelled with the version.
        let build = IntGaugeVec::new(
            Opts::new(
                "build_info",
                "The kaas build serving these metrics (always 1)",
            ),
            &["version"],
        )
        .expect("valid gauge");
        inner
            .registry
            .register(Box::new(build.clone()))
            .expect("registered once");
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);

        Self(Arc::new(inner))
    }

    /// The text exposition format.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let families = self.0.registry.gather();
        // Unprefixed, as every exporter names them.
        #[cfg(not(madsim))]
        let families = {
            let mut f = families;
            f.extend(prometheus::core::Collector::collect(&self.0.process));
            f
        };
        if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
            tracing::warn!(error = %e, "metrics not rendered");
        }
        out
    }

    /// One answered request: its API, how long, and the error codes its
    /// response carries (empty: none).
    pub fn request(&self, api: &str, elapsed: Duration, errors: &[i16]) {
        let i = &self.0.api;
        i.request_seconds
            .with_label_values(&[api])
            .observe(elapsed.as_secs_f64());
        if errors.is_empty() {
            i.requests.with_label_values(&[api, "NONE"]).inc();
        }
        for code in errors {
            i.requests
                .with_label_values(&[api, &error_name(*code)])
                .inc();
        }
    }

    /// A request refused because this broker's epoch of the partition was
    /// superseded (a zombie's append, stopped by the fence).
    pub fn fenced(&self, api: &str) {
        self.0.api.fenced.with_label_values(&[api]).inc();
    }

    /// A read refused because a stored batch is damaged.
    pub fn damaged_read(&self) {
        self.0.api.damaged_reads.inc();
    }

    pub fn bytes_in(&self, topic: &str, n: usize) {
        self.0
            .api
            .bytes_in
            .with_label_values(&[topic])
            .inc_by(n as u64);
    }

    pub fn bytes_out(&self, topic: &str, n: usize) {
        self.0
            .api
            .bytes_out
            .with_label_values(&[topic])
            .inc_by(n as u64);
    }

    /// A client connection admitted: counted open until the guard drops.
    pub fn connection_opened(&self) -> OpenConnection {
        self.0.api.connections.inc();
        OpenConnection(self.0.api.connections.clone())
    }

    pub fn connection_refused(&self) {
        self.0.api.connections_refused.inc();
    }

    pub fn led(&self, partitions: usize, offline: usize, coordinator_slots: usize) {
        self.0.leadership.partitions_led.set(partitions as i64);
        self.0.leadership.partitions_offline.set(offline as i64);
        self.0
            .leadership
            .coordinator_slots_led
            .set(coordinator_slots as i64);
    }

    /// What the volume reports of its size and free space, if it can.
    pub fn volume_space(&self, space: Option<vfs::Space>) {
        let (size, free) = space.map_or((0, 0), |s| (s.total_bytes, s.available_bytes));
        self.0.volume.volume_size.set(size as i64);
        self.0.volume.volume_free.set(free as i64);
    }

    pub fn volume_full(&self, full: bool) {
        self.0.volume.volume_full.set(i64::from(full));
    }

    pub fn takeover(&self, what: &str, elapsed: Duration, ok: bool) {
        let outcome = if ok { "ok" } else { "failed" };
        self.0
            .leadership
            .takeovers
            .with_label_values(&[what, outcome])
            .inc();
        if ok {
            self.0
                .leadership
                .takeover_seconds
                .with_label_values(&[what])
                .observe(elapsed.as_secs_f64());
        }
    }

    /// A client throttled by its quota (`quota`: Kafka's key).
    pub fn throttled(&self, quota: &str, throttle: Duration) {
        self.0
            .api
            .throttle_seconds
            .with_label_values(&[quota])
            .observe(throttle.as_secs_f64());
    }

    pub fn deletion_backlog(&self, topics: usize) {
        self.0.log.deletion_backlog.set(topics as i64);
    }

    /// A compaction pass ended: with what it did, or failed.
    pub fn compacted(&self, elapsed: Duration, done: Option<&crate::log::partition::Compacted>) {
        let m = &self.0.log;
        m.compactions
            .with_label_values(&[if done.is_some() { "ok" } else { "failed" }])
            .inc();
        if let Some(d) = done {
            m.compaction_seconds
                .with_label_values(&[] as &[&str])
                .observe(elapsed.as_secs_f64());
            m.compaction_bytes
                .with_label_values(&["read"])
                .inc_by(d.bytes_read);
            m.compaction_bytes
                .with_label_values(&["written"])
                .inc_by(d.bytes_written);
            m.compaction_compressed.inc_by(d.compressed_batches);
        }
    }

    pub fn retention_backlog(&self, files: usize) {
        self.0.log.retention_backlog.set(files as i64);
    }

    /// Feeds the volume metrics; wrap the volume with
    /// `vfs::observed::Observed::new(vfs, metrics.volume_observer())`.
    pub fn volume_observer(&self) -> Arc<dyn Observer> {
        Arc::new(VolumeObserver(self.clone()))
    }

    #[cfg(test)]
    fn histogram(&self, op: &str) -> prometheus::Histogram {
        self.0.volume.volume_seconds.with_label_values(&[op])
    }
}

pub struct OpenConnection(IntGauge);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Kafka's name for an error code (`NOT_LEADER_OR_FOLLOWER`), or the code.
fn error_name(code: i16) -> String {
    match kafka_protocol::ResponseError::try_from_code(code) {
        Some(kafka_protocol::ResponseError::Unknown(_)) | None => format!("CODE_{code}"),
        Some(e) => screaming_snake(&format!("{e:?}")),
    }
}

fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

struct VolumeObserver(Metrics);

impl Observer for VolumeObserver {
    fn done(&self, op: Op, elapsed: Duration, outcome: Result<(), &io::Error>) {
        let i = &(self.0).0.volume;
        i.volume_seconds
            .with_label_values(&[op.name()])
            .observe(elapsed.as_secs_f64());
        if let Err(e) = outcome {
            i.volume_errors
                .with_label_values(&[op.name(), vfs::observed::errno(e)])
                .inc();
        }
    }

    fn nfs_files_seen(&self, n: usize) {
        (self.0).0.volume.nfs_files.inc_by(n as u64);
    }

    fn lost_reply(&self, op: Op) {
        (self.0)
            .0
            .volume
            .lost_replies
            .with_label_values(&[op.name()])
            .inc();
    }

    fn slow(&self, op: Op, path: &std::path::Path, elapsed: Duration) {
        (self.0)
            .0
            .volume
            .slow_calls
            .with_label_values(&[op.name()])
            .inc();
        tracing::warn!(
            op = op.name(),
            path = %path.display(),
            secs = format!("{:.1}", elapsed.as_secs_f64()),
            "a volume call was slow (an NFS server in its grace period after a restart, or \
             recalling a dead host's delegation, holds calls back; see deploy/README.md, \
             \"The NFS server's settings\")"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_text_format_with_kafka_error_names() {
        let m = Metrics::new();
        m.request("Produce", Duration::from_millis(3), &[]);
        m.request("Produce", Duration::from_millis(4), &[6]);
        m.bytes_in("orders", 1024);
        m.fenced("Produce");
        m.led(3, 0, 2);
        let open = m.connection_opened();
        drop(m.connection_opened());
        m.volume_observer()
            .done(Op::WriteAndSync, Duration::from_millis(2), Ok(()));
        let stale = io::Error::from(io::ErrorKind::StaleNetworkFileHandle);
        m.volume_observer()
            .done(Op::Open, Duration::from_millis(1), Err(&stale));
        let text = String::from_utf8(m.render()).unwrap();
        for line in [
            "kaas_requests_total{api=\"Produce\",error=\"NONE\"} 1",
            "kaas_requests_total{api=\"Produce\",error=\"NOT_LEADER_OR_FOLLOWER\"} 1",
            "kaas_request_duration_seconds_count{api=\"Produce\"} 2",
            "kaas_topic_bytes_in_total{topic=\"orders\"} 1024",
            "kaas_fence_refusals_total{api=\"Produce\"} 1",
            "kaas_partitions_led 3",
            "kaas_partitions_offline 0",
            "kaas_volume_full 0",
            "kaas_volume_free_bytes 0",
            "kaas_coordinator_slots_led 2",
            "kaas_connections 1",
            "kaas_volume_errors_total{errno=\"ESTALE\",op=\"open\"} 1",
            "# TYPE kaas_volume_op_duration_seconds histogram",
        ] {
            assert!(text.contains(line), "missing {line} in:\n{text}");
        }
        assert_eq!(m.histogram("write_and_sync").get_sample_count(), 1);
        assert!(text.contains("kaas_takeovers_total{outcome=\"failed\",what=\"partition\"} 0"));
        drop(open);
        assert!(
            String::from_utf8(m.render())
                .unwrap()
                .contains("kaas_connections 0")
        );
    }

    #[test]
    fn every_metric_is_there_from_the_start() {
        let text = String::from_utf8(Metrics::new().render()).unwrap();
        for line in [
            "kaas_compaction_duration_seconds_count 0",
            "kaas_takeover_duration_seconds_count{what=\"partition\"} 0",
            "kaas_volume_op_duration_seconds_count{op=\"write_and_sync\"} 0",
            "kaas_damaged_batch_reads_total 0",
            #[cfg(not(madsim))]
            "\nprocess_open_fds ",
            &format!(
                "kaas_build_info{{version=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION")
            ),
        ] {
            assert!(text.contains(line), "missing {line} in:\n{text}");
        }
    }

    /// A model NFS whose every call stalls 6 s: each call is counted as
    /// slow under its own op.
    #[cfg_attr(not(madsim), tokio::test(start_paused = true))]
    #[cfg_attr(madsim, tokio::test)]
    async fn counts_slow_volume_calls_by_op() {
        use vfs::model::{Faults, ModelNfs, NfsConfig};
        let config = NfsConfig {
            faults: Faults {
                stall_probability: 1.0,
                stall_ms: 6_000,
                ..Faults::default()
            },
            ..NfsConfig::default()
        };
        let nfs = ModelNfs::new(config, 7);
        let m = Metrics::new();
        let v = vfs::observed::Observed::new(Arc::new(nfs.host(1)), m.volume_observer());
        use vfs::Vfs;
        v.mkdir(std::path::Path::new("d")).await.unwrap();
        v.rename(std::path::Path::new("d"), std::path::Path::new("e"))
            .await
            .unwrap();
        let text = String::from_utf8(m.render()).unwrap();
        for line in [
            "kaas_volume_slow_calls_total{op=\"mkdir\"} 1",
            "kaas_volume_slow_calls_total{op=\"rename\"} 1",
        ] {
            assert!(text.contains(line), "missing {line} in:\n{text}");
        }
    }

    /// Every reply of the model NFS lost: each replace's temp create is
    /// answered EEXIST and its rename ENOENT, both after taking effect;
    /// the replace finds its own result, succeeds, and says so.
    #[cfg_attr(not(madsim), tokio::test(start_paused = true))]
    #[cfg_attr(madsim, tokio::test)]
    async fn counts_the_lost_replies_a_replace_found_to_have_taken_effect() {
        use vfs::model::{Faults, ModelNfs, NfsConfig};
        let config = NfsConfig {
            faults: Faults {
                lost_reply_probability: 1.0,
                ..Faults::default()
            },
            ..NfsConfig::default()
        };
        let nfs = ModelNfs::new(config, 7);
        let m = Metrics::new();
        let v = vfs::observed::Observed::new(Arc::new(nfs.host(1)), m.volume_observer());
        for i in 0..3u8 {
            vfs::durable::atomic_replace(&v, std::path::Path::new("f"), vec![i].into())
                .await
                .unwrap();
        }
        let text = String::from_utf8(m.render()).unwrap();
        for line in [
            "kaas_volume_lost_replies_total{op=\"open\"} 3",
            "kaas_volume_lost_replies_total{op=\"rename\"} 3",
        ] {
            assert!(text.contains(line), "missing {line} in:\n{text}");
        }
    }

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(31_000), "CODE_31000");
    }
}

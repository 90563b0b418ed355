//! What a compaction pass costs on a real directory: its throughput next
//! to fsync'd writes of the same directory measured in the same run, and
//! the memory it takes next to its offset map's bound.
//!
//! `cargo bench -p broker --bench compaction` (data in
//! `target/bench-compaction`, or in `$KAAS_BENCH_DIR`).

#[cfg(not(madsim))]
// A benchmark of the real directory: real time and std::fs are its yardstick.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
mod real {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::time::Instant as WallClock;

    use broker::log::batch;
    use broker::log::fence::{EpochClaims, LeadershipFence};
    use broker::log::partition::{CleanerLimits, CompactionConfig};
    use broker::log::topic::{self, TopicMeta};
    use broker::log::{LogConfig, PartitionLog};
    use bytes::{Bytes, BytesMut};
    use vfs::durable::ClaimToken;
    use vfs::{PosixVfs, Vfs};

    const MIB: usize = 1 << 20;
    /// Bytes of records written before the pass.
    const LOG: usize = 256 * MIB;
    const VALUE: usize = 1000;
    const PER_BATCH: usize = 64;

    fn mbps(bytes: u64, secs: f64) -> f64 {
        bytes as f64 / MIB as f64 / secs
    }

    /// Peak resident memory since the last reset (`VmHWM`), in MiB.
    fn peak_rss_mib() -> f64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }

    /// CPU seconds (user + system) this process has used so far.
    fn cpu_secs() -> f64 {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // Fields after the command's closing parenthesis; utime and stime
        // are the 12th and 13th of them, in clock ticks (100 a second).
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        (ticks(11) + ticks(12)) / 100.0
    }

    /// Starts a new peak (Linux: `clear_refs` 5 resets `VmHWM`).
    fn reset_peak_rss() {
        let _ = std::fs::write("/proc/self/clear_refs", "5");
    }

    /// A batch of `PER_BATCH` records, the `n`th write on: key `n % keys`.
    fn keyed_batch(n: usize, keys: usize) -> Bytes {
        let keys_and_values: Vec<(Vec<u8>, Vec<u8>)> = (n..n + PER_BATCH)
            .map(|i| {
                let k = format!("key-{:08}", i % keys).into_bytes();
                let mut v = format!("value-{i}-").into_bytes();
                v.resize(VALUE, b'x');
                (k, v)
            })
            .collect();
        let records: Vec<(&[u8], Option<&[u8]>)> = keys_and_values
            .iter()
            .map(|(k, v)| (k.as_slice(), Some(v.as_slice())))
            .collect();
        batch::build_keyed((-1, -1, -1), 0, &records)
    }

    async fn fresh_topic(vfs: &dyn Vfs, name: &str) -> TopicMeta {
        for d in ["topics", "topics/names"] {
            let _ = vfs.mkdir(Path::new(d)).await;
        }
        topic::create_topic(vfs, name, 1).await.expect("topic")
    }

    async fn lead(vfs: Arc<dyn Vfs>, meta: &TopicMeta, config: LogConfig) -> PartitionLog {
        let dir = topic::partition_dir(&meta.id, 0);
        let fence: Arc<dyn LeadershipFence> = Arc::new(EpochClaims::new(vfs.clone(), dir.clone()));
        PartitionLog::open_as_leader(
            vfs,
            dir,
            (&meta.id, 0),
            1,
            &ClaimToken::fresh("bench"),
            fence,
            config,
        )
        .await
        .expect("leader")
    }

    /// A log of `LOG` bytes over `keys` keys, all sealed.
    async fn written(vfs: Arc<dyn Vfs>, name: &str, keys: usize) -> PartitionLog {
        let config = LogConfig {
            segment_bytes: 64 << 20,
            segment_ms: Some(1),
            retention_ms: None,
            compaction: Some(CompactionConfig {
                min_cleanable_dirty_ratio: 0.0,
                ..CompactionConfig::default()
            }),
            ..LogConfig::default()
        };
        let meta = fresh_topic(vfs.as_ref(), name).await;
        let log = lead(vfs, &meta, config).await;
        let mut n = 0;
        let mut bytes = 0;
        while bytes < LOG {
            let mut set = BytesMut::new();
            for _ in 0..16 {
                set.extend_from_slice(&keyed_batch(n, keys));
                n += PER_BATCH;
            }
            bytes += set.len();
            log.append(set.freeze()).await.expect("append");
        }
        log.roll_if_due(0).await.expect("roll check");
        assert!(log.roll_if_due(10).await.expect("roll"), "the tail rolls");
        log
    }

    pub fn run() {
        let dir: PathBuf = std::env::var_os("KAAS_BENCH_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench-compaction")
            });
        let volume = PosixVfs::open_or_create_local(&dir).expect("bench dir");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        println!("compaction benchmark in {}", dir.display());
        println!("| measure | figure | baseline (same run) | ratio |");
        println!("|---|---|---|---|");
        rt.block_on(async {
            let vfs: Arc<dyn Vfs> = Arc::new(volume.clone());
            let _ = vfs::durable::converge_remove(vfs.as_ref(), Path::new("topics")).await;
            let dir2 = dir.clone();
            let raw = tokio::task::spawn_blocking(move || {
                vfs::testkit::raw_fsync_bandwidth(&dir2, LOG, MIB).expect("raw bound")
            })
            .await
            .expect("raw");
            for (keys, buffer) in [(65_536usize, 1u64 << 20), (16_384, 128 << 20), (65_536, 128 << 20)] {
                eprintln!("writing {} MiB over {keys} keys ...", LOG / MIB);
                let log = written(vfs.clone(), &format!("c{keys}-{buffer}"), keys).await;
                let limits = CleanerLimits {
                    dedupe_buffer_bytes: buffer,
                    io_bytes_per_second: None,
                };
                let size_before = log.size_bytes();
                reset_peak_rss();
                let base_rss = peak_rss_mib();
                let cpu_before = cpu_secs();
                let started = WallClock::now();
                let mut passes = Vec::new();
                while let Some(done) = log.compact(1_000, &limits).await.expect("pass") {
                    passes.push(done);
                }
                let secs = started.elapsed().as_secs_f64();
                let cpu = cpu_secs() - cpu_before;
                let peak = peak_rss_mib() - base_rss;
                let read: u64 = passes.iter().map(|d| d.bytes_read).sum();
                let size_after = log.size_bytes();
                let label = format!(
                    "{} MiB, {keys} keys, dedupe buffer {} MiB: {} pass(es), {:.1} keys a pass",
                    LOG / MIB,
                    buffer >> 20,
                    passes.len(),
                    passes.iter().map(|d| d.keys).sum::<usize>() as f64 / passes.len().max(1) as f64
                );
                println!(
                    "| compaction, {label} (MB/s of segments read) | {:.0} | raw fsync'd writes {raw:.0} | {:.2} |",
                    mbps(read, secs),
                    mbps(read, secs) / raw
                );
                println!(
                    "| log size after / before, same | {:.1} MiB of {:.1} MiB | | {:.3} |",
                    size_after as f64 / MIB as f64,
                    size_before as f64 / MIB as f64,
                    size_after as f64 / size_before.max(1) as f64
                );
                println!(
                    "| CPU seconds of the passes, same | {cpu:.2} | wall {secs:.2} s | {:.2} (1.0: one core busy, the pass is CPU-bound) |",
                    cpu / secs
                );
                println!(
                    "| peak resident memory growth during the passes, same (MiB) | {peak:.1} | offset map bound {:.1} MiB | |",
                    buffer as f64 / MIB as f64
                );
                drop(log);
            }
        });
        rt.block_on(async {
            let _ = vfs::durable::converge_remove(&volume, Path::new("topics")).await;
        });
    }
}

fn main() {
    #[cfg(not(madsim))]
    real::run();
    #[cfg(madsim)]
    eprintln!("the compaction benchmark measures a real directory: run it in the production build");
}

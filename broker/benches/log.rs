//! What the partition log costs on a real directory, next to the bounds of
//! that directory measured in the same run.
//!
//! `cargo bench -p broker --bench log` (data in `target/bench-log`, or in
//! `$KAAS_BENCH_DIR` to measure another filesystem, e.g. an NFS mount;
//! `KAAS_BENCH_ONLY=checkpoint` for the checkpoint's cost alone).

#[cfg(not(madsim))]
// A benchmark of the real directory: real time and std::fs are its yardstick.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
mod real {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::time::Instant as WallClock;

    use broker::log::batch;
    use broker::log::fence::{EpochClaims, LeadershipFence};
    use broker::log::topic::{self, TopicMeta};
    use broker::log::{LogConfig, PartitionLog};
    use bytes::{Bytes, BytesMut};
    use vfs::durable::ClaimToken;
    use vfs::testkit::Counting;
    use vfs::{PosixVfs, Vfs};

    const MIB: usize = 1 << 20;
    const APPEND_TOTAL: usize = 256 * MIB;

    fn mbps(bytes: usize, secs: f64) -> f64 {
        bytes as f64 / MIB as f64 / secs
    }

    /// A record set of `size` bytes: uncompressed batches of 64 KiB, or
    /// one batch of about `size` if that is smaller.
    fn record_set(seed: u8, size: usize) -> Bytes {
        let batch_size = size.min(64 * 1024);
        let value = vec![seed; batch_size - 100];
        let mut set = BytesMut::with_capacity(size);
        for _ in 0..size / batch_size {
            set.extend_from_slice(&batch::build((-1, -1, -1), 0, &[&value]));
        }
        set.freeze()
    }

    fn raw_fsync_bandwidth(dir: &Path) -> f64 {
        vfs::testkit::raw_fsync_bandwidth(dir, APPEND_TOTAL, MIB).expect("raw bound")
    }

    /// Removes what a run left on the volume, through the Vfs like the broker.
    async fn clear(vfs: &dyn Vfs, path: &Path) {
        let _ = vfs::durable::converge_remove(vfs, path).await;
    }

    async fn fresh_topic(vfs: &dyn Vfs, name: &str) -> TopicMeta {
        for d in ["topics", "topics/names"] {
            let _ = vfs.mkdir(Path::new(d)).await;
        }
        topic::create_topic(vfs, name, 1).await.expect("topic")
    }

    async fn lead(
        vfs: Arc<dyn Vfs>,
        meta: &TopicMeta,
        epoch: u32,
        config: LogConfig,
    ) -> PartitionLog {
        let dir = topic::partition_dir(&meta.id, 0);
        let fence: Arc<dyn LeadershipFence> = Arc::new(EpochClaims::new(vfs.clone(), dir.clone()));
        PartitionLog::open_as_leader(
            vfs,
            dir,
            (&meta.id, 0),
            epoch,
            &ClaimToken::fresh("bench"),
            fence,
            config,
        )
        .await
        .expect("leader")
    }

    fn config(segment: u64, checkpoint: u64) -> LogConfig {
        LogConfig {
            segment_bytes: segment,
            checkpoint_bytes: checkpoint,
            checkpoint_interval: std::time::Duration::from_secs(3600),
            retention_ms: None,
            retention_bytes: None,
            ..LogConfig::default()
        }
    }

    /// Appends `total` bytes in record sets of `set_size` from `writers`
    /// tasks, each waiting for its acknowledgement before the next append.
    async fn append(log: &Arc<PartitionLog>, total: usize, writers: usize, set_size: usize) -> f64 {
        // Every append gets a buffer of its own, as a request read off a
        // socket does; they are made before the clock starts.
        let per_writer = total / set_size / writers;
        let template = record_set(1, set_size);
        let set_len = template.len();
        let sets: Vec<Vec<Bytes>> = (0..writers)
            .map(|_| {
                (0..per_writer)
                    .map(|_| Bytes::from(template.to_vec()))
                    .collect()
            })
            .collect();
        let start = WallClock::now();
        let tasks: Vec<_> = sets
            .into_iter()
            .map(|sets| {
                let log = log.clone();
                tokio::spawn(async move {
                    for set in sets {
                        log.append(set).await.expect("append");
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("writer");
        }
        mbps(
            per_writer * writers * set_len,
            start.elapsed().as_secs_f64(),
        )
    }

    /// Appends `total` bytes in record sets of `set_size` to each of
    /// `logs` at once, one writer per partition; MB/s over all of them.
    async fn append_spread(logs: &[Arc<PartitionLog>], total: usize, set_size: usize) -> f64 {
        let start = WallClock::now();
        let per_log = total / logs.len();
        let rates: Vec<_> = logs
            .iter()
            .map(|l| {
                let l = l.clone();
                tokio::spawn(async move { append(&l, per_log, 1, set_size).await })
            })
            .collect();
        for r in rates {
            r.await.expect("writer");
        }
        mbps(total, start.elapsed().as_secs_f64())
    }

    /// What the acknowledged-offset window costs: the manifest rewritten
    /// once a second per partition that took writes (the default), next to
    /// once an hour (no time-based checkpoint in these runs), on small
    /// record sets where the flush cycles are many and short. Pairs on
    /// fresh topics, the median reported.
    async fn checkpoint_cost(vfs: Arc<dyn Vfs>, counting: &Counting) {
        const SPREAD: usize = 32;
        let every = |secs: u64| LogConfig {
            checkpoint_interval: std::time::Duration::from_secs(secs),
            ..config(1 << 30, u64::MAX)
        };
        let mut one = Vec::new();
        let mut many = Vec::new();
        for round in 0..5 {
            eprintln!(
                "checkpoint pair {round}: 64 MiB in 4 KiB sets, checkpoint every hour, then every second ..."
            );
            let mut rates = Vec::new();
            for secs in [3600, 1] {
                let meta = fresh_topic(vfs.as_ref(), &format!("ck{secs}-{round}")).await;
                let l = Arc::new(lead(vfs.clone(), &meta, 1, every(secs)).await);
                counting.counts.reset();
                let started = WallClock::now();
                let rate = append(&l, 64 * MIB, 8, 4096).await;
                let took = started.elapsed().as_secs_f64();
                let fsyncs = counting.counts.get(&counting.counts.fsyncs);
                drop(l);
                clear(vfs.as_ref(), &topic::topic_dir(&meta.id)).await;
                let mut metas = Vec::new();
                let mut logs = Vec::new();
                for p in 0..SPREAD {
                    let m = fresh_topic(vfs.as_ref(), &format!("ck{secs}-{round}-{p}")).await;
                    logs.push(Arc::new(lead(vfs.clone(), &m, 1, every(secs)).await));
                    metas.push(m);
                }
                let spread = append_spread(&logs, 64 * MIB, 4096).await;
                drop(logs);
                for m in metas {
                    clear(vfs.as_ref(), &topic::topic_dir(&m.id)).await;
                }
                rates.push((rate, took, fsyncs, spread));
            }
            let ((hour, _, hour_fsyncs, hour_spread), (sec, took, sec_fsyncs, sec_spread)) =
                (rates[0], rates[1]);
            one.push((
                sec / hour,
                sec,
                hour,
                took,
                sec_fsyncs as f64 - hour_fsyncs as f64,
            ));
            many.push((sec_spread / hour_spread, sec_spread, hour_spread));
        }
        one.sort_by(|a, b| a.0.total_cmp(&b.0));
        many.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (ratio, sec, hour, took, extra) = one[one.len() / 2];
        println!(
            "| append, 8 writers x 4 KiB sets, checkpoint every 1 s (MB/s, median of 5 pairs) | {sec:.1} | every hour {hour:.1} | {ratio:.3} (run {took:.1} s, {extra:+.0} fsyncs) |"
        );
        println!(
            "| checkpoint 1 s / 1 h, all 5 pairs | {} | | |",
            one.iter()
                .map(|p| format!("{:.3}", p.0))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let (ratio, sec, hour) = many[many.len() / 2];
        println!(
            "| append, {SPREAD} partitions x 1 writer x 4 KiB sets, checkpoint every 1 s (MB/s, median) | {sec:.1} | every hour {hour:.1} | {ratio:.3} |"
        );
        println!(
            "| checkpoint 1 s / 1 h, {SPREAD} partitions, all 5 pairs | {} | | |",
            many.iter()
                .map(|p| format!("{:.3}", p.0))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }

    async fn fetch_all(log: &PartitionLog) -> (f64, usize) {
        let start = WallClock::now();
        let (mut offset, mut bytes) = (0, 0);
        loop {
            let r = log.read(offset, MIB).await.expect("read");
            if r.records.is_empty() {
                break;
            }
            let mut at = 0;
            while at < r.records.len() {
                let h = batch::parse(&r.records[at..]).expect("valid batch");
                offset = h.next_offset();
                at += h.size;
            }
            bytes += r.records.len();
        }
        (mbps(bytes, start.elapsed().as_secs_f64()), bytes)
    }

    async fn takeover_secs(vfs: Arc<dyn Vfs>, meta: &TopicMeta, cfg: LogConfig) -> f64 {
        let start = WallClock::now();
        let log = lead(vfs, meta, 2, cfg).await;
        let secs = start.elapsed().as_secs_f64();
        log.close().await.expect("close");
        secs
    }

    pub fn run() {
        let dir: PathBuf = std::env::var_os("KAAS_BENCH_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench-log")
            });
        let volume = PosixVfs::open_or_create_local(&dir).expect("bench dir");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        println!("partition log benchmark in {}", dir.display());
        println!("| measure | figure | baseline (same run) | ratio |");
        println!("|---|---|---|---|");
        rt.block_on(async {
            let posix: Arc<dyn Vfs> = Arc::new(volume.clone());
            clear(posix.as_ref(), Path::new("topics")).await;
            let counting = Arc::new(Counting::new(posix.clone()));
            let vfs: Arc<dyn Vfs> = counting.clone();
            if std::env::var("KAAS_BENCH_ONLY").as_deref() == Ok("checkpoint") {
                checkpoint_cost(vfs, &counting).await;
                return;
            }

            // This disk's speed drifts a lot between runs (and with what was
            // just written or freed), so the bound and kaas run in pairs,
            // each pair on fresh files, and the median pair is reported.
            let mut pairs = Vec::new();
            let mut pipelined = Vec::new();
            let mut fsyncs = 0;
            let mut kept = None;
            for round in 0..5 {
                eprintln!("pair {round}: raw fsync'd writes, then kaas appends ({} MiB each) ...", APPEND_TOTAL / MIB);
                let dir2 = dir.clone();
                let raw = tokio::task::spawn_blocking(move || raw_fsync_bandwidth(&dir2)).await.expect("raw");
                let meta = fresh_topic(vfs.as_ref(), &format!("append{round}")).await;
                let l = Arc::new(lead(vfs.clone(), &meta, 1, config(1 << 30, 64 << 20)).await);
                counting.counts.reset();
                let kaas = append(&l, APPEND_TOTAL, 1, MIB).await;
                fsyncs = counting.counts.get(&counting.counts.fsyncs);
                // Two producers with 512 KiB requests in flight: ~1 MiB cycles
                // in which validating one request overlaps the other's fsync.
                let meta2 = fresh_topic(vfs.as_ref(), &format!("pipelined{round}")).await;
                let l2 = Arc::new(lead(vfs.clone(), &meta2, 1, config(1 << 30, 64 << 20)).await);
                counting.counts.reset();
                let piped = append(&l2, APPEND_TOTAL, 2, MIB / 2).await;
                let cycle = APPEND_TOTAL as f64 / MIB as f64 / counting.counts.get(&counting.counts.fsyncs).max(1) as f64;
                drop(l2);
                clear(vfs.as_ref(), &topic::topic_dir(&meta2.id)).await;
                pipelined.push((piped / raw, piped, cycle));
                pairs.push((kaas / raw, kaas, raw));
                match kept {
                    None => kept = Some(l),
                    Some(_) => {
                        drop(l);
                        clear(vfs.as_ref(), &topic::topic_dir(&meta.id)).await;
                    }
                }
            }
            pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (ratio, one, raw) = pairs[pairs.len() / 2];
            let log = kept.expect("five pairs ran");
            println!(
                "| append, 1 writer, 1 MiB cycles (MB/s, median of 5 pairs) | {one:.0} | raw fsync'd writes {raw:.0} | {ratio:.2} (target >= 0.8) |"
            );
            println!(
                "| append / raw, all 5 pairs | {} | | |",
                pairs.iter().map(|p| format!("{:.2}", p.0)).collect::<Vec<_>>().join(" ")
            );
            pipelined.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (pratio, piped, cycle) = pipelined[pipelined.len() / 2];
            println!(
                "| append, 2 producers x 512 KiB in flight, {cycle:.1} MiB cycles (MB/s, median) | {piped:.0} | raw fsync'd writes (same pair) | {pratio:.2} (target >= 0.8) |"
            );
            println!("| fsyncs per MiB appended | {:.2} | 1 | |", fsyncs as f64 / (APPEND_TOTAL / MIB) as f64);

            eprintln!("appending {} MiB from 8 writers ...", APPEND_TOTAL / MIB);
            let meta8 = fresh_topic(vfs.as_ref(), "append8").await;
            let log8 = Arc::new(lead(vfs.clone(), &meta8, 1, config(1 << 30, 64 << 20)).await);
            counting.counts.reset();
            let eight = append(&log8, APPEND_TOTAL, 8, MIB).await;
            let fsyncs8 = counting.counts.get(&counting.counts.fsyncs);
            println!(
                "| append, 8 writers (MB/s) | {eight:.0} | raw fsync'd writes {raw:.0} | {:.2} |",
                eight / raw
            );
            println!(
                "| MiB per flush cycle, 8 writers | {:.1} | | |",
                (APPEND_TOTAL / MIB) as f64 / fsyncs8.max(1) as f64
            );

            eprintln!("fetching it back ...");
            let (fetch, bytes) = fetch_all(&log).await;
            println!("| fetch, 1 MiB reads (MB/s) | {fetch:.0} | raw fsync'd writes {raw:.0} | {:.2} |", fetch / raw);
            assert_eq!(bytes, APPEND_TOTAL / MIB * record_set(0, MIB).len(), "everything appended is read back");

            eprintln!("building a 1 GiB log with a 64 MiB unsealed tail, and a 64 MiB log ...");
            let cfg = config(320 << 20, u64::MAX);
            let big = fresh_topic(vfs.as_ref(), "big").await;
            let big_log = Arc::new(lead(vfs.clone(), &big, 1, cfg.clone()).await);
            append(&big_log, 1024 * MIB, 4, MIB).await;
            drop(big_log);
            let small = fresh_topic(vfs.as_ref(), "small").await;
            let small_log = Arc::new(lead(vfs.clone(), &small, 1, cfg.clone()).await);
            append(&small_log, 64 * MIB, 4, MIB).await;
            drop(small_log);
            let big_secs = takeover_secs(vfs.clone(), &big, cfg.clone()).await;
            let small_secs = takeover_secs(vfs.clone(), &small, cfg).await;
            println!(
                "| takeover of a 1 GiB log, 64 MiB tail (ms) | {:.1} | 64 MiB log {:.1} ms | {:.2} (target <= 1.5) |",
                big_secs * 1e3,
                small_secs * 1e3,
                big_secs / small_secs
            );
            checkpoint_cost(vfs, &counting).await;
        });
        rt.block_on(clear(&volume, Path::new("topics")));
    }
}

fn main() {
    #[cfg(not(madsim))]
    real::run();
    #[cfg(madsim)]
    eprintln!("the log benchmark measures a real directory: run it in the production build");
}

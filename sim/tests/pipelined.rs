//! One broker over the simulated network, its clients on the wire: requests
//! pipelined as librdkafka sends them (several produce requests of a
//! transaction in flight on one connection) are all answered, and a
//! partition whose flush cycle never ends holds up neither new topics'
//! leadership nor the broker's shutdown.
#![cfg(madsim)]
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use broker::config::Config;
use clap::Parser;
use madsim::runtime::{Handle, Runtime};
use sim::history::{Event, History};
use sim::session::Session;
use tokio::sync::Notify;
use tokio::time::Instant;
use vfs::Vfs;
use vfs::model::{Faults, ModelNfs, NfsConfig};

/// Broker 0 on the shared volume, at the address the simulator's clients
/// reach it on; `stop` is its SIGTERM, `stopped` says when `run` returned.
fn broker(nfs: &ModelNfs, stop: Arc<Notify>, stopped: Arc<AtomicBool>) {
    let config = Config::try_parse_from([
        "kaas",
        "--broker-id",
        "0",
        "--listen",
        "10.0.0.1:9092",
        "--heartbeat-interval-secs",
        "1",
        "--advertised-check-secs",
        "0",
    ])
    .unwrap();
    let nfs = nfs.clone();
    Handle::current()
        .create_node()
        .name("broker-0")
        .ip("10.0.0.1".parse().unwrap())
        .init(move || {
            let vfs: Arc<dyn Vfs> = Arc::new(nfs.boot_host(0));
            let (config, stop, stopped) = (config.clone(), stop.clone(), stopped.clone());
            async move {
                broker::node::run(vfs, config, async move { stop.notified().await })
                    .await
                    .unwrap();
                stopped.store(true, Ordering::SeqCst);
            }
        })
        .build();
}

/// A healthy volume: every call takes 0.5-3 ms, as on NFS.
fn volume(seed: u64) -> ModelNfs {
    let config = NfsConfig {
        faults: Faults {
            latency_min_us: 500,
            latency_max_us: 3_000,
            ..Faults::default()
        },
        ..NfsConfig::default()
    };
    ModelNfs::new(config, seed)
}

fn client(name: &str) -> madsim::runtime::NodeHandle {
    Handle::current()
        .create_node()
        .name(name)
        .ip("10.0.1.1".parse().unwrap())
        .build()
}

#[test]
fn transactional_produce_requests_in_flight_together_are_all_answered() {
    for seed in 1..=3 {
        let rt = Runtime::with_seed_and_config(seed, madsim::Config::default());
        let history = rt.block_on(async {
            let nfs = volume(seed);
            broker(
                &nfs,
                Arc::new(Notify::new()),
                Arc::new(AtomicBool::new(false)),
            );
            let history = History::default();
            let s = Session::new("pipeliner", 1, Instant::now(), history.clone());
            client("pipeliner")
                .spawn(sim::actors::pipeliner::final_pipeliner(
                    s,
                    Duration::from_secs(90),
                ))
                .await
                .unwrap();
            history
        });
        let done = history
            .events()
            .into_iter()
            .find_map(|(_, e)| match e {
                Event::FinalRequests {
                    sent,
                    timed_out,
                    transactions,
                    wanted,
                    ..
                } => Some((sent, timed_out, transactions, wanted)),
                _ => None,
            })
            .unwrap();
        let (sent, timed_out, transactions, wanted) = done;
        assert!(
            timed_out.is_empty(),
            "seed {seed}: of {sent} requests, unanswered: {timed_out:?}"
        );
        assert_eq!(transactions, wanted, "seed {seed}: transactions finished");
        assert!(
            sent >= u64::from(wanted) * 6,
            "seed {seed}: only {sent} requests sent"
        );
    }
}

#[test]
fn a_partition_whose_flush_never_ends_holds_up_no_other_topic_nor_the_shutdown() {
    let rt = Runtime::with_seed_and_config(7, madsim::Config::default());
    // The first flush cycle (the stuck topic's first produce) never gets
    // past its fsync: the partition's writer stays held, as by a volume
    // call that hangs.
    let held = Arc::new(AtomicBool::new(false));
    let holds = held.clone();
    vfs::fault_point::install(Some(Arc::new(move |_, name| {
        if name == "flush.synced" && !holds.swap(true, Ordering::SeqCst) {
            Box::pin(std::future::pending())
        } else {
            Box::pin(async {})
        }
    })));
    let (stop, stopped) = (Arc::new(Notify::new()), Arc::new(AtomicBool::new(false)));
    let (fresh_acked, stop_took) = rt.block_on({
        let (stop, stopped) = (stop.clone(), stopped.clone());
        let held = held.clone();
        async move {
            let nfs = volume(7);
            broker(&nfs, stop.clone(), stopped.clone());
            let acked = client("admin")
                .spawn(async move {
                    let mut s = Session::new("admin", 1, Instant::now(), History::default());
                    while !s.create_topic("stuck", 1).await {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    let record = || broker::log::batch::build((-1, -1, -1), 0, &[b"v"]);
                    // Produced to until a flush of it is the one held (a
                    // produce that raced the partition's first takeover
                    // is refused before it gets there), from a session of
                    // its own: the held one is never answered.
                    let producer = tokio::spawn(async move {
                        let mut p = Session::new("stuck", 1, Instant::now(), History::default());
                        loop {
                            let stuck = p.produce("stuck", 0, record()).await;
                            assert!(!matches!(stuck, Ok((0, _, _))), "{stuck:?}");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                    });
                    while !held.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    // Retention and the follow loop's rounds come and go
                    // while the writer stays held.
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    while !s.create_topic("fresh", 1).await {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    let created = s.now();
                    let mut acked = false;
                    while !acked && s.now() < created + Duration::from_secs(30) {
                        acked = matches!(s.produce("fresh", 0, record()).await, Ok((0, _, _)));
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                    producer.abort();
                    acked
                })
                .await
                .unwrap();
            let asked = Instant::now();
            stop.notify_one();
            while !stopped.load(Ordering::SeqCst) && asked.elapsed() < Duration::from_secs(60) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (acked, asked.elapsed())
        }
    });
    vfs::fault_point::install(None);
    assert!(
        fresh_acked,
        "a new topic never took a write while another partition's flush was stuck"
    );
    assert!(
        stopped.load(Ordering::SeqCst),
        "the broker did not stop within 60 s of its SIGTERM"
    );
    let config = Config::try_parse_from(["kaas"]).unwrap();
    assert!(
        stop_took <= broker::node::hand_off_deadline(&config),
        "stopped {stop_took:?} after the SIGTERM"
    );
}

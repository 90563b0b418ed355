//! The simulator replays a seed exactly and its checks catch what they claim.
#![cfg(madsim)]
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use broker::cluster::heartbeat::Heartbeat;
use bytes::Bytes;
use sim::run::{self, Options, Violations};
use sim::trace::Trace;
use vfs::{MemVfs, Vfs};

/// Short runs: the CI's simulator step replays full-length seeds twice
/// (`--check-determinism`) in the release build; these debug-build runs
/// only need enough of a world for a digest to depend on every draw.
fn opts(seed: u64) -> Options {
    Options::new(seed, 3, Duration::from_secs(15))
}

#[test]
fn the_same_seed_gives_the_same_digest() {
    let a = run::run(&opts(7));
    let b = run::run(&opts(7));
    assert!(a.passed(), "{:?}", a.violations);
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.digest, b.digest);
    assert!(a.events > 10, "the run observed work: {}", a.events);
}

#[test]
fn different_seeds_give_different_digests() {
    let digests: std::collections::BTreeSet<_> =
        (1..=3).map(|seed| run::run(&opts(seed)).digest).collect();
    assert_eq!(digests.len(), 3, "{digests:?}");
}

#[test]
fn every_random_draw_replays() {
    // madsim runs the seed twice and panics if any random draw differs.
    let report = madsim::runtime::Runtime::check_determinism(11, madsim::Config::default(), || {
        run::simulate(opts(11), false)
    });
    assert!(report.passed(), "{:?}", report.violations);
}

type Setup = fn(MemVfs) -> Pin<Box<dyn Future<Output = ()>>>;

/// Runs the heartbeat observer against a volume that `setup` writes by hand.
fn observe_volume(seed: u64, setup: Setup) -> Vec<String> {
    let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    rt.block_on(async move {
        let volume = MemVfs::new();
        volume.mkdir(Path::new("brokers")).await.unwrap();
        let violations = Violations::default();
        let observer = madsim::runtime::Handle::current().create_node().build();
        let vfs: Arc<dyn Vfs> = Arc::new(volume.clone());
        observer.spawn(run::observe(
            vfs,
            1,
            Trace::default(),
            violations.clone(),
            String::new,
        ));
        setup(volume).await;
        violations.take()
    })
}

async fn publish(volume: &MemVfs, sequence: u64) {
    let hb = Heartbeat {
        broker_id: 0,
        incarnation: 1,
        sequence,
        advertised: "x:1".into(),
        endpoints: Default::default(),
        leaving: false,
        stuck: Vec::new(),
        claimed_past: Vec::new(),
        offline: Vec::new(),
        created: Vec::new(),
    };
    broker::cluster::heartbeat::write(volume, &hb)
        .await
        .unwrap();
}

#[test]
fn the_observer_catches_a_heartbeat_going_back() {
    let violations = observe_volume(1, |volume| {
        Box::pin(async move {
            publish(&volume, 5).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            publish(&volume, 3).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
        })
    });
    assert!(
        violations
            .iter()
            .any(|v| v.contains("heartbeat-regressed broker-0 5 -> 3")),
        "{violations:?}"
    );
}

#[test]
fn the_observer_catches_a_torn_heartbeat() {
    let violations = observe_volume(2, |volume| {
        Box::pin(async move {
            let f = volume
                .open(Path::new("brokers/0"), vfs::OpenOptions::create_new())
                .await
                .unwrap();
            f.write_at(0, Bytes::from_static(b"KAAS\x01"))
                .await
                .unwrap();
            f.close().await.unwrap();
            tokio::time::sleep(Duration::from_secs(2)).await;
        })
    });
    assert!(
        violations.iter().any(|v| v.contains("torn-read broker-0")),
        "{violations:?}"
    );
}

#[test]
fn the_observer_catches_a_silent_broker() {
    let violations = observe_volume(3, |volume| {
        Box::pin(async move {
            publish(&volume, 1).await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        })
    });
    assert!(
        violations
            .iter()
            .any(|v| v.contains("liveness broker-0 silent")),
        "{violations:?}"
    );
}

#[test]
fn fault_points_hold_and_crash_brokers_inside_their_volume_changes_and_replay() {
    let mut o = Options::with_faults(3, 3, Duration::from_secs(40), Default::default());
    o.points = sim::swarm::PointRates {
        delay: 0.05,
        delay_max_ms: 100,
        pause: 0.01,
        crash: 0.03,
        max_crashes: 2,
        focus: Vec::new(),
        aim_after_ms: 0,
        ..Default::default()
    };
    let a = run::run(&o);
    let b = run::run(&o);
    assert!(a.passed(), "{:?}", a.violations);
    assert_eq!(a.digest, b.digest, "a run with fault points replays");
    let p = &a.points;
    assert_eq!(p.crashes, 2, "{p:?}");
    assert!(p.pauses > 0 && p.delays > 0, "{p:?}");
    for point in [
        "takeover.epoch-claimed",
        "replace.temp-durable",
        "flush.synced",
    ] {
        assert!(
            p.reached.contains_key(point),
            "{point} never reached: {p:?}"
        );
    }
    let crashes = a
        .trace
        .iter()
        .filter(|l| l.contains("crashes broker-"))
        .count();
    assert_eq!(crashes, 2);
}

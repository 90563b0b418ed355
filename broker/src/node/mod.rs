//! One broker process: the part that is the same in production and simulation.
//!
//! `run` is the life of a broker in four steps: the start-up checks
//! (`start_up`), the listeners (`listen`), following the cluster until
//! shutdown (`Node::follow`), and the controlled shutdown
//! (`Node::hand_off`).

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use vfs::Vfs;
use vfs::durable::ClaimToken;
use vfs::observed::Observed;

use crate::api::{Api, ApiConfig};
use crate::cluster::assignment::Assignment;
use crate::cluster::controller::{ControllerAgent, Role};
use crate::cluster::heartbeat::{self, Heartbeat};
use crate::cluster::id_claim::{self, IdClaim};
use crate::cluster::identity;
use crate::config::Config;
use crate::groups::{Coordinators, GroupConfig};
use crate::health::{self, Readiness};
use crate::leaders::Leaders;
use crate::log::staging::StagingSweep;
use crate::log::{LogConfig, topic};
use crate::metrics::Metrics;
use crate::protocol::server::ListenerInfo;
use crate::security::Security;
use crate::startup;

mod chores;
mod start;
mod volume;

use chores::{Chore, Cleaner};
use start::{
    Bound, endpoints, heartbeat_interval, inter_broker_listener, listen, session_timeout, start_up,
};
pub use volume::prepare_volume;
use volume::redrive;

/// Runs a broker on `vfs` until `shutdown` completes.
///
/// Start-up errors (a volume that cannot be prepared) are returned; a failed
/// heartbeat is retried at the next tick, since the end state ("my latest
/// heartbeat is published") is simply re-driven.
pub async fn run(
    vfs: Arc<dyn Vfs>,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    tokio::pin!(shutdown);
    let metrics = Metrics::new();
    let vfs: Arc<dyn Vfs> = Arc::new(Observed::new(vfs, metrics.volume_observer()));
    // Start-up serves nothing yet, so a shutdown during it just stops: its
    // volume steps are each atomic and re-driven by the next start, as
    // after a crash there.
    let starting = async {
        let incarnation: u64 = madsim::rand::random();
        let (cluster_id, swept, claimed) = start_up(vfs.as_ref(), &config, incarnation).await?;
        let (listeners, health, readiness) = listen(&config, &metrics).await?;
        if config.advertised_check_secs > 0 {
            startup::check_advertised(
                &config.advertised(),
                Duration::from_secs(config.advertised_check_secs),
            )
            .await?;
        }
        let mut node = Node::new(
            vfs.clone(),
            config.clone(),
            listeners,
            readiness,
            metrics.clone(),
            (incarnation, claimed),
        );
        node.load_security().await?;
        tracing::info!(
            broker_id = node.hb.broker_id,
            incarnation = format_args!("{:016x}", node.hb.incarnation),
            swept,
            cluster_id,
            "broker started"
        );
        let beater = node.start_beater().await;
        Ok::<_, io::Error>((node, beater, health))
    };
    let (mut node, beater, health) = tokio::select! {
        started = starting => started?,
        () = &mut shutdown => {
            tracing::info!("shutdown requested during start-up: stopping before serving");
            return Ok(());
        }
    };
    let mut superseded = beater.superseded();
    let superseded_or_shutdown = async {
        tokio::select! {
            () = &mut shutdown => {}
            _ = superseded.wait_for(Option::is_some) => {}
        }
    };
    node.follow(superseded_or_shutdown).await;
    if let Some(by) = beater.superseded().borrow().clone() {
        // The newer process owns this id now: no hand-off (its `leaving`
        // heartbeat would speak for the newer process), only stop.
        let broker_id = node.config.broker_id;
        beater.stop();
        node.stop(health);
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "this process no longer runs as broker {}: a newer process ({by}) claimed the                  id after this one's heartbeat looked stopped; stopping without a hand-off",
                broker_id
            ),
        ));
    }
    let hand_off = hand_off_deadline(&node.config);
    if tokio::time::timeout(hand_off, node.hand_off(beater.stop()))
        .await
        .is_err()
    {
        tracing::warn!(
            deadline_secs = hand_off.as_secs(),
            "shutdown deadline passed before the hand-off ended (a volume call or a partition's \
             flush that does not end): stopping anyway; the controller moves what this broker \
             still leads once its heartbeat is a session timeout old"
        );
    }
    node.stop(health);
    Ok(())
}

/// The longest a controlled shutdown hands off: one session timeout for the
/// controller to move this broker's partitions, and a little for the last
/// heartbeat and answers. A broker whose hand-off is stuck stops anyway.
pub fn hand_off_deadline(config: &Config) -> Duration {
    session_timeout(config) + Duration::from_secs(3)
}

/// How often a broker follows the cluster (controller, assignment) between
/// two heartbeats.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// A started broker: its services and what it knows of the cluster.
struct Node {
    vfs: Arc<dyn Vfs>,
    config: Config,
    leaders: Arc<Leaders>,
    coordinators: Arc<Coordinators>,
    timers: JoinHandle<()>,
    publish: watch::Sender<Option<Assignment>>,
    agent: ControllerAgent,
    staging_sweep: StagingSweep,
    readiness: Readiness,
    /// Clients are served once this broker knows the cluster (its first
    /// assignment): before, Metadata could only name itself and no
    /// controller, and some clients wait on that answer for good. Until
    /// then connections wait in the listen backlog.
    not_serving: Option<(Bound, Arc<Api>)>,
    servers: Vec<JoinHandle<()>>,
    /// Reads newer credentials and ACLs.
    security_refresher: Option<JoinHandle<()>>,
    /// Rolls segments by age and compacts, a round at a time.
    cleaner: Cleaner,
    retention: Chore,
    /// Re-reads the configs of the topics led here once per interval.
    configs_refresh: Chore,
    /// Reads the volume's size and free space once per interval.
    volume_watch: Chore,
    security: Arc<Security>,
    /// Writes the markers of the transactions this broker coordinates.
    transactions: Option<JoinHandle<()>>,
    /// This run's first heartbeat.
    hb: Heartbeat,
    /// This process's claim of its broker id.
    claimed: IdClaim,
    /// The API created topics or partitions: follow the cluster now.
    created: Arc<tokio::sync::Notify>,
    /// Topics the API created, announced in the heartbeat until led.
    announced: Arc<crate::cluster::announced::Announced>,
    metrics: Metrics,
}

impl Node {
    fn new(
        vfs: Arc<dyn Vfs>,
        config: Config,
        listeners: Bound,
        readiness: Readiness,
        metrics: Metrics,
        (incarnation, claimed): (u64, IdClaim),
    ) -> Node {
        let leaders = Arc::new(
            Leaders::new(vfs.clone(), config.broker_id, LogConfig::default())
                .with_metrics(metrics.clone()),
        );
        let coordinators = Arc::new(
            Coordinators::new(
                vfs.clone(),
                config.broker_id,
                GroupConfig {
                    initial_rebalance_delay: Duration::from_millis(
                        config.group_initial_rebalance_delay_ms,
                    ),
                    // The broker's own clock: in the simulator it is skewed and
                    // jumps, and commit timestamps must see that too.
                    clock: config.wall_clock.clone(),
                    min_session_timeout: Duration::from_millis(config.group_min_session_timeout_ms),
                    max_session_timeout: Duration::from_millis(config.group_max_session_timeout_ms),
                    consumer: crate::groups::consumer::Settings {
                        session_timeout: Duration::from_millis(
                            config.group_consumer_session_timeout_ms,
                        ),
                        heartbeat_interval: Duration::from_millis(
                            config.group_consumer_heartbeat_interval_ms,
                        ),
                    },
                },
            )
            .with_metrics(metrics.clone()),
        );
        let timers = tokio::spawn(coordinators.clone().run_timers());
        let (publish, assignment) = watch::channel(None);
        let security = Arc::new(Security::new(vfs.clone(), config.security()));

        let api = Api::new(
            vfs.clone(),
            ApiConfig {
                broker_id: config.broker_id,
                incarnation,
                advertised: config.advertised(),
                auto_create_topics: config.auto_create_topics,
                default_partitions: config.num_partitions.max(1),
                broker_configs: config.kafka_view(),
                producer_id_block: config.producer_id_block,
                inter_broker_listener: inter_broker_listener(&config),
                endpoints: endpoints(&config),
                log_dir: config.data_dir.display().to_string(),
            },
            leaders.clone(),
            coordinators.clone(),
            assignment,
            security.clone(),
        )
        .with_metrics(metrics.clone());
        let session_timeout = session_timeout(&config);
        let agent = ControllerAgent::new(vfs.clone(), config.broker_id, session_timeout);
        let hb = Heartbeat {
            broker_id: config.broker_id,
            incarnation,
            sequence: 0,
            advertised: config.advertised(),
            endpoints: endpoints(&config),
            leaving: false,
            stuck: Vec::new(),
            claimed_past: Vec::new(),
            offline: Vec::new(),
            created: Vec::new(),
        };
        Node {
            vfs,
            leaders,
            coordinators,
            timers,
            publish,
            agent,
            staging_sweep: StagingSweep::new(session_timeout),
            readiness,
            created: api.created(),
            announced: api.announced(),
            not_serving: Some((listeners, Arc::new(api))),
            servers: Vec::new(),
            security_refresher: None,
            cleaner: Cleaner::default(),
            retention: Chore::default(),
            configs_refresh: Chore::default(),
            volume_watch: Chore::default(),
            security,
            transactions: None,
            hb,
            claimed,
            config,
            metrics,
        }
    }

    /// Loads the credentials (for SASL listeners) and the ACLs (when they
    /// are enforced) before any client is served: a broker that served
    /// before it read the ACLs would allow what they deny. Then keeps them
    /// fresh. A broker with neither reads neither document.
    async fn load_security(&mut self) -> io::Result<()> {
        let sasl = self
            .config
            .listeners()
            .is_ok_and(|l| l.iter().any(|l| l.protocol.sasl()));
        let acls = self.security.enforcing();
        if !sasl && !acls {
            return Ok(());
        }
        let security = self.security.clone();
        redrive("loading the credentials and ACLs", || async {
            if sasl {
                security.refresh_credentials().await?;
            }
            if acls {
                security.refresh_acls().await?;
            }
            Ok(())
        })
        .await?;
        let (version, _) = self.security.acls();
        tracing::info!(
            sasl,
            acls,
            acl_version = version,
            "credentials and ACLs loaded"
        );
        self.security_refresher = Some(tokio::spawn(self.security.clone().run_refresher(sasl)));
        Ok(())
    }

    /// Heartbeats go out from their own task, with what is stuck here.
    async fn start_beater(&self) -> heartbeat::Beater {
        let (leaders, coordinators) = (self.leaders.clone(), self.coordinators.clone());
        let stuck: heartbeat::StuckReport = Box::new(move || {
            let (mut stuck, past) = leaders.stuck();
            stuck.extend(coordinators.stuck());
            (stuck, past)
        });
        let leaders = self.leaders.clone();
        let offline: heartbeat::OfflineReport = Box::new(move || leaders.offline());
        let interval = heartbeat_interval(&self.config);
        heartbeat::Beater::start(
            self.vfs.clone(),
            self.hb.clone(),
            interval,
            stuck,
            offline,
            self.announced.clone(),
            self.claimed.clone(),
        )
        .await
    }

    /// Follows the cluster every `FOLLOW_EVERY` until `shutdown`, so a new
    /// assignment (a failover, a handoff) takes effect within that, not a
    /// whole heartbeat interval later; slower chores run once per interval,
    /// each as a task of its own. A shutdown ends the step under way: it
    /// waits on the volume, and a call that hangs must not keep the broker
    /// from stopping (every step is re-driven by whoever comes next, as
    /// after a crash).
    async fn follow(&mut self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let interval = heartbeat_interval(&self.config);
        let follow = interval.min(FOLLOW_EVERY);
        let mut last_beat: Option<tokio::time::Instant> = None;
        let mut synced: Option<(u32, u64)> = None;
        loop {
            let now = tokio::time::Instant::now();
            let beat = last_beat.is_none_or(|t| now.duration_since(t) >= interval);
            if beat {
                last_beat = Some(now);
            }
            tokio::select! {
                biased;
                () = &mut shutdown => {
                    tracing::info!("shutdown requested while following the cluster: that step is left to whoever comes next");
                    break;
                }
                () = self.follow_once(beat, &mut synced) => {}
            }
            // `biased`: tokio's select draws its branch order from a
            // thread-local generator that outlives one simulated run, so
            // an unbiased select makes a seed depend on the seeds its thread
            // ran before.
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep(follow) => {}
                () = self.created.notified() => self.agent.relist_topics(),
            }
        }
    }

    /// One step of following the cluster: the controller's tick, the
    /// assignment applied, and the chores due started.
    async fn follow_once(&mut self, beat: bool, synced: &mut Option<(u32, u64)>) {
        let began = tokio::time::Instant::now();
        match self.agent.tick().await {
            Ok(role) => {
                if beat && matches!(role, Role::Controller { .. }) {
                    self.controller_chores().await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "controller tick failed; retrying next tick"),
        }
        if let Some(a) = self.agent.assignment().cloned() {
            // A new assignment is applied at once; an unchanged one once
            // per interval (a takeover that failed is retried then).
            let key = (a.controller_epoch, a.version);
            if beat || *synced != Some(key) {
                let new = *synced != Some(key);
                *synced = Some(key);
                let ticked = began.elapsed();
                self.apply(a).await;
                if new {
                    // Every failover passes through here: how long this
                    // broker took to read the assignment and to apply it.
                    tracing::info!(
                        controller_epoch = key.0,
                        version = key.1,
                        tick_ms = ticked.as_millis() as u64,
                        apply_ms = (began.elapsed() - ticked).as_millis() as u64,
                        "assignment applied"
                    );
                }
            }
        }
        if beat {
            // A task of its own: retention waits for each partition's
            // writer, and a partition whose flush does not end must not
            // hold up the assignment, leadership and heartbeats.
            let (leaders, clock) = (self.leaders.clone(), self.config.wall_clock.clone());
            self.retention
                .start(async move { leaders.enforce_retention(clock.now_ms()).await });
            // Its own task: a topic config read per topic led.
            let leaders = self.leaders.clone();
            self.configs_refresh
                .start(async move { leaders.refresh_configs().await });
            // Its own task too: statfs on a stalled server waits with it.
            let (vfs, leaders) = (self.vfs.clone(), self.leaders.clone());
            let (metrics, readiness) = (self.metrics.clone(), self.readiness.clone());
            self.volume_watch.start(async move {
                let space = vfs.space().await.ok().flatten();
                metrics.volume_space(space);
                let full = leaders.volume_full() || space.is_some_and(|s| s.available_bytes == 0);
                metrics.volume_full(full);
                readiness.volume_full(full);
            });
        }
        self.cleaner.start_if_due(&self.leaders, &self.config);
        self.metrics.led(
            self.leaders.count(),
            self.leaders.offline().len(),
            self.coordinators.led().len(),
        );
    }

    /// The controller re-drives deletions to their end state and sweeps the
    /// staging of creators that are gone.
    async fn controller_chores(&mut self) {
        let live = self.agent.assignment().map(|a| a.brokers.clone());
        if let Some(live) = live {
            let dir = Path::new(topic::TOPICS_DIR);
            if let Err(e) = self.staging_sweep.run(self.vfs.as_ref(), dir, &live).await {
                tracing::warn!(error = %e, "sweeping staging directories; retrying next tick");
            }
        }
        match topic::reap_tombstones(self.vfs.as_ref()).await {
            Ok(pending) => self.metrics.deletion_backlog(pending.len()),
            Err(e) => tracing::warn!(error = %e, "reaping deleted topics; retrying next tick"),
        }
    }

    /// Takes over and gives up partitions and groups as `a` says, tells the
    /// API about it, and starts serving clients at the first assignment.
    async fn apply(&mut self, a: Assignment) {
        // Metadata and FindCoordinator answer from the new assignment at
        // once: a takeover costs several round trips to the volume per
        // partition, and answering from the old one meanwhile sent clients
        // to brokers that had given up (seconds, on a slow volume). A
        // request for a partition still being opened here gets a retriable
        // NOT_LEADER_OR_FOLLOWER, as from any broker not (yet) leading it.
        self.publish.send_replace(Some(a.clone()));
        self.announced.settled(&a);
        if self.not_serving.is_some() {
            // Before the first client is served, what it leads is open.
            self.leaders.sync(&a).await;
        } else {
            // Not waited for: the next assignment, perhaps a failover, must
            // not wait behind this one's takeovers.
            self.leaders.start_sync(&a).await;
        }
        self.coordinators.sync(&a).await;
        let registered = a
            .brokers
            .get(&self.hb.broker_id)
            .is_some_and(|b| b.incarnation == self.hb.incarnation);
        self.readiness.observe(registered);
        if let Some((listeners, api)) = self.not_serving.take() {
            tracing::info!(listeners = listeners.len(), "serving clients");
            self.transactions = Some(tokio::spawn(api.clone().drive_transactions()));
            // In force before the first request, so that a restarted broker
            // does not serve a throttled client freely until its refresher
            // runs; if the volume fails now, the refresher keeps trying.
            if let Err(e) = api.quotas().refresh().await {
                tracing::warn!(error = %e, "cannot read the client quotas yet");
            }
            // Aborted with the servers at stop.
            let every = self.security.config.refresh;
            self.servers
                .push(tokio::spawn(api.quotas().run_refresher(every)));
            let protocol = self.config.protocol();
            for (info, socket) in listeners {
                self.servers
                    .push(tokio::spawn(crate::protocol::server::serve(
                        socket,
                        api.clone(),
                        protocol.clone(),
                        info,
                    )));
            }
        }
    }

    /// Controlled shutdown: announce it, let the controller (perhaps this
    /// broker) move this broker's partitions, keep serving until they are
    /// gone or a session timeout passed.
    async fn hand_off(&mut self, mut hb: Heartbeat) {
        hb.leaving = true;
        self.readiness.leaving();
        self.agent.leave();
        let deadline = tokio::time::Instant::now() + session_timeout(&self.config);
        loop {
            hb.sequence += 1;
            if let Err(e) = heartbeat::write(self.vfs.as_ref(), &hb).await {
                tracing::warn!(error = %e, "shutdown heartbeat not published");
            }
            let _ = self.agent.tick().await;
            let me = hb.broker_id;
            let (mine, others) = self.agent.assignment().map_or((0, false), |a| {
                (a.led_by(me), a.brokers.keys().any(|b| *b != me))
            });
            if let Some(a) = self.agent.assignment().cloned() {
                self.publish.send_replace(Some(a.clone()));
                self.leaders.sync(&a).await;
                self.coordinators.sync(&a).await;
            }
            // Alone in the cluster, there is nobody to hand off to.
            if mine == 0 || !others || tokio::time::Instant::now() >= deadline {
                tracing::info!(broker_id = hb.broker_id, still_leading = mine, "handed off");
                if mine > 0 {
                    self.leaders.checkpoint_all().await;
                }
                if mine == 0 && others {
                    // Keep answering for two follow periods: clients asking
                    // here get NOT_LEADER_OR_FOLLOWER and metadata naming the
                    // new leaders, which the other brokers have followed by
                    // then. Closing at once makes clients back off and
                    // rediscover the cluster (about a second with librdkafka).
                    tokio::time::sleep(2 * FOLLOW_EVERY).await;
                }
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn stop(self, health: Option<JoinHandle<()>>) {
        for ((topic_id, partition), log) in self.leaders.led() {
            if let Some(d) = log.flushing_for().filter(|d| *d >= Duration::from_secs(1)) {
                tracing::warn!(
                    topic_id,
                    partition,
                    flushing_secs = d.as_secs(),
                    "stopping with a flush cycle of this partition still under way (a volume \
                     call that does not end): its requests stay unanswered, and the partition's \
                     next leader seals what reached the volume"
                );
            }
        }
        self.cleaner.chore.abort();
        self.retention.abort();
        self.configs_refresh.abort();
        self.volume_watch.abort();
        self.leaders.abort_takeovers();
        for server in self.servers {
            server.abort();
        }
        if let Some(r) = self.security_refresher {
            r.abort();
        }
        if let Some(transactions) = self.transactions {
            transactions.abort();
        }
        self.timers.abort();
        if let Some(health) = health {
            health.abort();
        }
        tracing::info!(broker_id = self.hb.broker_id, "broker stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[tokio::test]
    async fn publishes_heartbeats_until_shutdown() {
        let vfs: Arc<dyn Vfs> = Arc::new(vfs::MemVfs::new());
        let config =
            Config::try_parse_from(["kaas", "--broker-id", "4", "--heartbeat-interval-secs", "1"])
                .unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let broker = tokio::spawn(run(vfs.clone(), config, async {
            let _ = stop_rx.await;
        }));
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let hb = heartbeat::read(vfs.as_ref(), 4).await.unwrap();
        assert_eq!(hb.broker_id, 4);
        assert!(
            hb.sequence >= 2,
            "three ticks in 2.5 s, got {}",
            hb.sequence
        );
        stop_tx.send(()).unwrap();
        broker.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_volume_that_cannot_be_prepared_is_a_clear_error() {
        let vfs: Arc<dyn Vfs> = Arc::new(vfs::MemVfs::new());
        // A file where the brokers directory should be.
        vfs.open(Path::new("brokers"), vfs::OpenOptions::create_new())
            .await
            .unwrap();
        let config = Config::try_parse_from(["kaas", "--listen", "127.0.0.1:0"]).unwrap();
        let err = run(vfs, config, std::future::pending()).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotADirectory);
        assert!(err.to_string().contains("`brokers` exists"), "{err}");
    }
}

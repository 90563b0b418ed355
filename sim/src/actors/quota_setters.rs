//! Operators setting client quotas: two admins (two connections, so their
//! changes race for the same next version of the client-quotas document)
//! send AlterClientQuotas through brokers picked at random, every second
//! or few, with now and then a DescribeClientQuotas, while the faults
//! fall. The quotas they set name clients and users the workload does not
//! use, except two, set first and never changed: a consumer_byte_rate for
//! [`THROTTLED`] and a producer_byte_rate for [`THROTTLED_PRODUCER`]. Once
//! the faults heal, a client of the first name fetches the workload topic
//! as fast as it can, ignoring its throttle, and every answer's bytes are
//! counted per broker; a client of the second produces to a topic of its
//! own ([`QUOTA_TOPIC`]) back to back, and what its log holds afterwards is
//! what the brokers let through.
//!
//! Rules (checker `quotas`): quota-change-lost, each quota on the volume
//! after the run is one an acknowledged request (or one that may still
//! have landed) set; quota-exceeded, no broker let a throttled client
//! fetch or produce more than its rate allows.

use std::collections::BTreeMap;
use std::time::Duration;

use broker::quota::{ClientQuotas, Entity, Kind, Name};
use broker::security::applied::Applied;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, ApiKey, DescribeClientQuotasRequest, FetchRequest, RequestKind,
    ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;
use vfs::Vfs;

use crate::actors::movers::{AdminOutcome, admin_call};
use crate::actors::{Actor, FinalRead, Finale, Play, Role, Stage};
use crate::history::Event;
use crate::hosts::OBSERVER_HOST;
use crate::session::Session;
use crate::workload::{PARTITIONS, TOPIC};
use std::net::Ipv4Addr;

/// The admins' address.
pub const ADMIN_IP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 0, 3, 8);

/// The client whose fetches are throttled once the faults heal.
pub const THROTTLED: &str = "quota-throttled";
/// Its consumer_byte_rate.
pub const THROTTLED_RATE: u64 = 4096;
/// The client whose produce requests are throttled once the faults heal,
/// and the topic (one partition) it writes. Its producer_byte_rate is
/// [`THROTTLED_RATE`].
pub const THROTTLED_PRODUCER: &str = "quota-throttled-producer";
pub const QUOTA_TOPIC: &str = "quota-produced";
/// The value of each of its records (one per request).
const PRODUCED_VALUE: usize = 1024;
/// The most one fetch answer carries.
pub const FETCH_MAX_BYTES: usize = 32 * 1024;
/// How long the throttled client fetches, and how long it waits first for
/// every broker to apply the quotas.
const FETCH_FOR: Duration = Duration::from_secs(10);
const SETTLE: Duration = Duration::from_secs(3);

/// The entities the admins change: none matches a workload client.
fn entities() -> [Entity; 4] {
    let named = |n: &str| Some(Name::Named(n.to_owned()));
    [
        Entity {
            user: None,
            client_id: named("quota-app-0"),
        },
        Entity {
            user: None,
            client_id: named("quota-app-1"),
        },
        Entity {
            user: named("quota-user"),
            client_id: Some(Name::Default),
        },
        Entity {
            user: named("quota-user"),
            client_id: named("quota-app-0"),
        },
    ]
}

/// How the rules name an entity.
pub fn label(e: &Entity) -> String {
    let part = |kind: &str, n: &Option<Name>| {
        n.as_ref().map(|n| match n {
            Name::Default => format!("{kind}=<default>"),
            Name::Named(s) => format!("{kind}={s}"),
        })
    };
    [part("user", &e.user), part("client-id", &e.client_id)]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(",")
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

async fn alter(s: &mut Session, entity: &Entity, kind: Kind, rate: Option<u64>) -> AdminOutcome {
    let sent = s.now();
    let mut parts = Vec::new();
    if let Some(u) = &entity.user {
        parts.push(("user", u));
    }
    if let Some(c) = &entity.client_id {
        parts.push(("client-id", c));
    }
    let req = AlterClientQuotasRequest::default().with_entries(vec![
        EntryData::default()
            .with_entity(
                parts
                    .into_iter()
                    .map(|(t, n)| {
                        EntityData::default()
                            .with_entity_type(text(t))
                            .with_entity_name(n.wire().map(text))
                    })
                    .collect(),
            )
            .with_ops(vec![
                OpData::default()
                    .with_key(text(kind.key()))
                    .with_value(rate.unwrap_or(0) as f64)
                    .with_remove(rate.is_none()),
            ]),
    ]);
    let answer = admin_call(
        s,
        ApiKey::AlterClientQuotas,
        1,
        RequestKind::AlterClientQuotas(req),
    )
    .await;
    let code = match answer {
        Ok(ResponseKind::AlterClientQuotas(r)) => r.entries.first().map(|e| e.error_code),
        _ => None,
    };
    let outcome = AdminOutcome::of(code, &[]);
    s.history.record(
        s.now(),
        Event::QuotaChange {
            entity: label(entity),
            key: kind.key(),
            rate,
            sent,
            outcome,
        },
    );
    outcome
}

async fn step(s: &mut Session) {
    let (which, kind, roll, rate) = {
        let mut rng = madsim::rand::thread_rng();
        (
            rng.gen_range(0..4),
            Kind::ALL[rng.gen_range(0..2)],
            rng.gen_range(0..100),
            rng.gen_range(1_000..1_000_000u64),
        )
    };
    let entity = &entities()[which];
    match roll {
        0..15 => {
            alter(s, entity, kind, None).await;
        }
        15..25 => {
            let req = RequestKind::DescribeClientQuotas(DescribeClientQuotasRequest::default());
            let _ = admin_call(s, ApiKey::DescribeClientQuotas, 1, req).await;
        }
        _ => {
            alter(s, entity, kind, Some(rate)).await;
        }
    }
}

/// Sets the throttled client's quota, then changes the others until
/// `until`, two admins at once.
pub async fn admin(mut s: Session, until: Duration) {
    for (client, kind) in [
        (THROTTLED, Kind::Fetch),
        (THROTTLED_PRODUCER, Kind::Produce),
    ] {
        let throttled = Entity {
            user: None,
            client_id: Some(Name::Named(client.to_owned())),
        };
        while s.now() < until
            && alter(&mut s, &throttled, kind, Some(THROTTLED_RATE)).await != AdminOutcome::Acked
        {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let mut other = s.twin("quota-setter-twin");
    while s.now() < until {
        tokio::join!(step(&mut s), step(&mut other));
        let pause = madsim::rand::thread_rng().gen_range(500..3000);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// Once the faults healed: fetches the workload topic as [`THROTTLED`]
/// from every leader, over and over from the log start, without waiting
/// out any throttle, and counts what each answer carries. Does nothing if
/// the quota was never acknowledged.
pub async fn throttled_fetcher(mut s: Session, quota_acked: bool) {
    if !quota_acked {
        return;
    }
    tokio::time::sleep(SETTLE).await;
    let from = s.now();
    let mut starts: BTreeMap<i32, i64> = BTreeMap::new();
    while s.now() < from + FETCH_FOR {
        let mut by_leader: BTreeMap<u32, Vec<i32>> = BTreeMap::new();
        for p in 0..PARTITIONS {
            if let Some(b) = s.leader(TOPIC, p).await {
                by_leader.entry(b).or_default().push(p);
            }
        }
        if by_leader.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for (broker, partitions) in by_leader {
            let req = FetchRequest::default()
                .with_max_wait_ms(50)
                .with_min_bytes(1)
                .with_max_bytes(FETCH_MAX_BYTES as i32)
                .with_topics(vec![
                    FetchTopic::default()
                        .with_topic(TopicName(text(TOPIC)))
                        .with_partitions(
                            partitions
                                .iter()
                                .map(|&p| {
                                    FetchPartition::default()
                                        .with_partition(p)
                                        .with_fetch_offset(starts.get(&p).copied().unwrap_or(0))
                                        .with_partition_max_bytes(FETCH_MAX_BYTES as i32)
                                })
                                .collect(),
                        ),
                ]);
            match s
                .client
                .call(broker, ApiKey::Fetch, 12, RequestKind::Fetch(req))
                .await
            {
                Ok(ResponseKind::Fetch(r)) => {
                    let mut bytes = 0;
                    for p in r.responses.iter().flat_map(|t| &t.partitions) {
                        bytes += p.records.as_ref().map_or(0, |r| r.len());
                        match p.error_code {
                            0 => {}
                            // OFFSET_OUT_OF_RANGE: trimmed; read from the start.
                            1 => {
                                starts.insert(p.partition_index, p.log_start_offset.max(0));
                            }
                            _ => s.forget(TOPIC, p.partition_index),
                        }
                    }
                    s.history
                        .record(s.now(), Event::QuotaFetched { broker, bytes });
                }
                _ => {
                    for p in partitions {
                        s.forget(TOPIC, p);
                    }
                }
            }
        }
    }
    s.history.record(
        s.now(),
        Event::QuotaWindow {
            from,
            to: s.now(),
            rate: THROTTLED_RATE,
        },
    );
}

/// Once the faults healed: produces one record at a time to
/// [`QUOTA_TOPIC`] as [`THROTTLED_PRODUCER`], back to back without waiting
/// out any throttle, then reads how many records its log holds. Does
/// nothing if the quota was never acknowledged.
pub async fn throttled_producer(mut s: Session, quota_acked: bool, deadline: Duration) {
    if !quota_acked {
        return;
    }
    let settled = s.now() + SETTLE;
    while !s.create_topic(QUOTA_TOPIC, 1).await {
        if s.now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let answered = s.now();
    tokio::time::sleep(settled.saturating_sub(s.now())).await;
    let value = vec![b'q'; PRODUCED_VALUE];
    let batch = broker::log::batch::build((-1, -1, -1), broker::clock::now_ms(), &[&value]);
    // The window opens at the first record appended: a new topic may wait
    // for its leader.
    let (mut leaders, mut unanswered) = (std::collections::BTreeSet::new(), 0);
    loop {
        if s.now() + FETCH_FOR >= deadline {
            return;
        }
        match s.produce(QUOTA_TOPIC, 0, batch.clone()).await {
            Ok((0, _, broker)) => {
                leaders.insert(broker);
                s.history.record(
                    s.now(),
                    Event::NewTopicWritable {
                        topic: QUOTA_TOPIC.to_owned(),
                        answered,
                        writable: s.now(),
                        settle: settled.saturating_sub(answered),
                    },
                );
                break;
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(()) => unanswered += 1,
        }
    }
    let from = s.now();
    while s.now() < from + FETCH_FOR {
        match s.produce(QUOTA_TOPIC, 0, batch.clone()).await {
            Ok((0, _, broker)) => {
                leaders.insert(broker);
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(()) => unanswered += 1,
        }
    }
    let to = s.now();
    while s.now() < deadline {
        if let Some(end) = s.list_offset(QUOTA_TOPIC, 0, -1).await {
            s.history.record(
                s.now(),
                Event::QuotaProduced {
                    from,
                    to,
                    rate: THROTTLED_RATE,
                    batch_bytes: batch.len(),
                    appended: end.max(0) as usize,
                    leaders: leaders.len(),
                    unanswered,
                },
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Every quota in the newest complete version on the volume, by (entity,
/// key); `None` if it cannot be read.
pub async fn final_state(volume: &dyn Vfs) -> Option<BTreeMap<(String, &'static str), u64>> {
    let applied = Applied::<ClientQuotas>::new(broker::quota::doc::doc());
    applied.refresh(volume).await.ok()?;
    let (_, doc) = applied.get();
    Some(
        doc.entries
            .iter()
            .flat_map(|(e, limits)| {
                Kind::ALL
                    .into_iter()
                    .filter_map(move |k| limits.get(k).map(|r| ((label(e), k.key()), r)))
            })
            .collect(),
    )
}

/// Admins setting client quotas and, once the faults heal, a client
/// fetching and another producing past their quotas.
pub struct QuotaSetters;
pub static QUOTA_SETTERS: QuotaSetters = QuotaSetters;

impl Actor for QuotaSetters {
    fn name(&self) -> &'static str {
        "quota-setters"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::operator("quota-setter-0", ADMIN_IP)]
    }

    fn play(&self, _role: &'static str, s: Session, stage: &Stage) -> Play {
        Box::pin(admin(s, stage.faults_end))
    }

    fn finale(&self, stage: &Stage, deadline: Duration) -> Vec<Finale> {
        let acked = |client: &str| {
            let entity = format!("client-id={client}");
            stage.history.events().into_iter().any(|(_, e)| {
                matches!(
                    e,
                    Event::QuotaChange {
                        entity: ref named,
                        outcome: AdminOutcome::Acked,
                        ..
                    } if *named == entity
                )
            })
        };
        vec![
            Finale {
                name: "final-quota-fetcher",
                ip: Ipv4Addr::new(10, 0, 2, 4),
                play: Box::pin(throttled_fetcher(
                    stage.session(THROTTLED),
                    acked(THROTTLED),
                )),
            },
            Finale {
                name: "final-quota-producer",
                ip: Ipv4Addr::new(10, 0, 2, 5),
                play: Box::pin(throttled_producer(
                    stage.session(THROTTLED_PRODUCER),
                    acked(THROTTLED_PRODUCER),
                    deadline,
                )),
            },
        ]
    }

    fn final_state(&self, stage: &Stage, _deadline: Duration) -> Vec<FinalRead> {
        let volume = stage.volume(OBSERVER_HOST);
        vec![Box::pin(async move {
            Event::QuotaFinal {
                found: final_state(volume.as_ref()).await,
            }
        })]
    }
}

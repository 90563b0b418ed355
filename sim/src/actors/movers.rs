//! An operator moving partitions: two admins (two connections, so their
//! changes race for the same next version of the preferred-leaders
//! document) send AlterPartitionReassignments for the workload topic's
//! partitions through brokers picked at random, every second or few, with
//! now and then a cancellation, an ElectLeaders or a
//! ListPartitionReassignments, while the producers and consumers run and
//! the faults fall. Every move is a leadership change under a new epoch,
//! so the partition log's takeover and fencing run far more often than
//! failures alone make them.
//!
//! Rules (checker `reassignments`): reassignment-lost, the preferred
//! broker on the volume after the run is one an acknowledged request (or
//! one that may still have landed) set; reassignment-unhonoured, once the
//! faults healed every partition is led by its live preferred broker.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ApiKey, BrokerId, ElectLeadersRequest,
    ListPartitionReassignmentsRequest, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;
use vfs::Vfs;

use crate::actors::{Actor, FinalRead, Play, Role, Stage};
use crate::history::Event;
use crate::hosts::OBSERVER_HOST;
use crate::session::Session;
use crate::workload::{PARTITIONS, TOPIC};

/// The admins' address.
pub const ADMIN_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 7);

/// How long an admin waits for an answer (Kafka's `request.timeout.ms`).
pub(crate) const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// NO_REASSIGNMENT_IN_PROGRESS: a cancellation that found nothing to
/// cancel, which changes nothing and is as definite as an acknowledgement.
const NO_REASSIGNMENT: i16 = 85;

pub use crate::history::{AdminOutcome, FinalState};

/// Sends an admin request to a broker picked at random and waits as long
/// as a Kafka admin client would.
pub(crate) async fn admin_call(
    s: &mut Session,
    api: ApiKey,
    version: i16,
    request: RequestKind,
) -> Result<ResponseKind, crate::client::CallError> {
    let to = s.any_broker();
    s.client
        .call_within(ADMIN_TIMEOUT, to, api, version, request)
        .await
}

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

async fn reassign(s: &mut Session, partition: i32, broker: Option<u32>) {
    let sent = s.now();
    let code = move_partition(s, TOPIC, partition, broker).await;
    let outcome = AdminOutcome::of(code, &[NO_REASSIGNMENT]);
    s.history.record(
        s.now(),
        Event::Reassign {
            partition,
            broker,
            sent,
            outcome,
        },
    );
}

/// AlterPartitionReassignments of one partition to `broker` (`None`:
/// cancel): the partition's error code, or `None` without an answer.
pub(crate) async fn move_partition(
    s: &mut Session,
    topic: &str,
    partition: i32,
    broker: Option<u32>,
) -> Option<i16> {
    let req = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(ADMIN_TIMEOUT.as_millis() as i32)
        .with_topics(vec![
            ReassignableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![
                    ReassignablePartition::default()
                        .with_partition_index(partition)
                        .with_replicas(broker.map(|b| vec![BrokerId(b as i32)])),
                ]),
        ]);
    let answer = admin_call(
        s,
        ApiKey::AlterPartitionReassignments,
        0,
        RequestKind::AlterPartitionReassignments(req),
    )
    .await;
    match answer {
        Ok(ResponseKind::AlterPartitionReassignments(r)) if r.error_code != 0 => Some(r.error_code),
        Ok(ResponseKind::AlterPartitionReassignments(r)) => r
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .map(|p| p.error_code),
        _ => None,
    }
}

/// Asks for a preferred-leader election of `partition` or a listing of
/// the moves; only that the broker answers matters (the rules judge the
/// volume and the assignment).
async fn look(s: &mut Session, partition: i32, elect: bool) {
    let (api, version, req) = if elect {
        let req = ElectLeadersRequest::default()
            .with_election_type(0)
            .with_timeout_ms(5_000)
            .with_topic_partitions(Some(vec![
                TopicPartitions::default()
                    .with_topic(topic())
                    .with_partitions(vec![partition]),
            ]));
        (ApiKey::ElectLeaders, 2, RequestKind::ElectLeaders(req))
    } else {
        let req = ListPartitionReassignmentsRequest::default().with_timeout_ms(5_000);
        (
            ApiKey::ListPartitionReassignments,
            0,
            RequestKind::ListPartitionReassignments(req),
        )
    };
    let _ = admin_call(s, api, version, req).await;
}

async fn step(s: &mut Session) {
    let (partition, roll, broker) = {
        let mut rng = madsim::rand::thread_rng();
        (
            rng.gen_range(0..PARTITIONS),
            rng.gen_range(0..100),
            rng.gen_range(0..s.brokers()),
        )
    };
    match roll {
        0..10 => reassign(s, partition, None).await,
        10..20 => look(s, partition, true).await,
        20..25 => look(s, partition, false).await,
        _ => reassign(s, partition, Some(broker)).await,
    }
}

/// Moves partitions until `until`, two admins at once.
pub async fn admin(mut s: Session, until: Duration) {
    let mut other = s.twin("mover-twin");
    while s.now() < until {
        tokio::join!(step(&mut s), step(&mut other));
        let pause = madsim::rand::thread_rng().gen_range(500..3000);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// What the volume says once the cluster converged: the workload topic's
/// preferred brokers (partition -> broker) in the newest complete version,
/// and the partitions whose live preferred broker does not lead them
/// (partition, preferred, leader) in the newest assignment, polled until
/// none is left or `deadline` passes. `None` if either cannot be read.
pub async fn final_state(
    volume: &dyn Vfs,
    start: tokio::time::Instant,
    deadline: Duration,
) -> Option<FinalState> {
    use broker::cluster::assignment::AssignmentReader;
    use broker::cluster::preferred;
    let id = broker::log::topic::lookup(volume, TOPIC).await.ok()??.id;
    let mut assignments = AssignmentReader::default();
    loop {
        let reader = preferred::reader();
        reader.refresh(volume).await.ok()?;
        let (_, doc) = reader.get();
        let pins: BTreeMap<i32, u32> = (0..PARTITIONS)
            .filter_map(|p| doc.get(&id, p as u32).map(|b| (p, b)))
            .collect();
        let a = assignments.refresh(volume).await.ok()?.cloned()?;
        let unhonoured: Vec<(i32, u32, Option<u32>)> = pins
            .iter()
            .filter(|(_, b)| a.brokers.contains_key(b))
            .map(|(&p, &b)| (p, b, a.leadership(&id, p as u32).map(|l| l.leader)))
            .filter(|(_, b, leader)| *leader != Some(*b))
            .collect();
        if unhonoured.is_empty() || start.elapsed() >= deadline {
            return Some((pins, unhonoured));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// An admin moving the workload topic's partitions to named brokers.
pub struct Movers;
pub static MOVERS: Movers = Movers;

impl Actor for Movers {
    fn name(&self) -> &'static str {
        "movers"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role {
            creates_topic: true,
            ..Role::operator("mover-0", ADMIN_IP)
        }]
    }

    fn play(&self, _role: &'static str, s: Session, stage: &Stage) -> Play {
        Box::pin(admin(s, stage.faults_end))
    }

    fn moves_leaders(&self) -> bool {
        true
    }

    fn final_state(&self, stage: &Stage, deadline: Duration) -> Vec<FinalRead> {
        let volume = stage.volume(OBSERVER_HOST);
        let start = stage.start;
        vec![Box::pin(async move {
            Event::ReassignFinal {
                found: final_state(volume.as_ref(), start, deadline).await,
            }
        })]
    }
}

//! Simulated members of a consumer-protocol group (KIP-848): the
//! coordinator assigns, the members reconcile by heartbeat. Each member
//! heartbeats every second with the partitions it owns, lets go of revoked
//! partitions after a random while of up to 3 s (committing them first, as
//! a Kafka consumer's revocation callback does; meanwhile it consumes them
//! and lists them as owned), takes new ones from their committed offsets,
//! consumes and commits in its member epoch (OffsetCommit v9). A member
//! whose session lapsed (no answered heartbeat for the session timeout since
//! the last answered one was sent) stops holding anything, as does one that
//! is fenced; now and then a member leaves and comes back as a new one
//! (`next-member-1` is static: it leaves with epoch -2 and its instance id
//! takes its partitions back).
//!
//! Every change of what a member holds is a [`Event::Holds`], judged by
//! consumer-group-overlap.

use std::collections::BTreeSet;
use std::time::Duration;

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, RequestKind,
    ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;
use uuid::Uuid;

use crate::actors::{Actor, Play, Role, Stage};
use crate::history::Event;
use crate::session::Session;
use crate::workload::TOPIC;

pub(crate) const NEXT_GROUP: &str = "sim-next";
/// The brokers' --group-consumer-session-timeout-ms (`harness`).
pub(crate) const SESSION: Duration = Duration::from_secs(10);
const HEARTBEAT: Duration = Duration::from_secs(1);

const UNKNOWN_MEMBER_ID: i16 = 25;
const FENCED_MEMBER_EPOCH: i16 = 110;
const UNRELEASED_INSTANCE_ID: i16 = 111;

fn text(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// One incarnation of a member: what it was told and what it holds.
struct Member {
    id: String,
    epoch: i32,
    /// Partitions of `TOPIC` it holds, with its position in each.
    owned: Vec<(i32, i64)>,
    /// The last offset it committed in each owned partition.
    committed: Vec<i64>,
    /// Its session as it knows it: the send time of its last answered
    /// heartbeat plus the session timeout.
    lease: Duration,
    /// The id of `TOPIC`, from the first answer that assigned some of it.
    topic_id: Uuid,
    /// Owned partitions the coordinator took away, let go of at `release_at`.
    revoking: BTreeSet<i32>,
    release_at: Duration,
}

impl Member {
    fn new(topic_id: Uuid) -> Self {
        let v: u128 = madsim::rand::random();
        Self {
            id: Uuid::from_u128(v).to_string(),
            epoch: 0,
            owned: Vec::new(),
            committed: Vec::new(),
            lease: Duration::ZERO,
            topic_id,
            revoking: BTreeSet::new(),
            release_at: Duration::ZERO,
        }
    }

    fn partitions(&self) -> Vec<i32> {
        self.owned.iter().map(|(p, _)| *p).collect()
    }
}

fn holds(s: &Session, m: &Member) {
    s.history.record(
        s.now(),
        Event::Holds {
            member: m.id.clone(),
            partitions: m.partitions(),
            until: m.lease,
        },
    );
}

/// Lets go of everything (fenced, lapsed or leaving).
fn drop_all(s: &Session, m: &mut Member) {
    m.revoking.clear();
    if !m.owned.is_empty() {
        m.owned.clear();
        m.committed.clear();
        holds(s, m);
    }
}

async fn heartbeat(
    s: &mut Session,
    m: &Member,
    epoch: i32,
    instance: Option<&str>,
) -> Option<ConsumerGroupHeartbeatResponse> {
    let to = s.coordinator().await?;
    let joining = epoch == 0;
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(NEXT_GROUP)))
        .with_member_id(text(&m.id))
        .with_member_epoch(epoch)
        .with_instance_id(instance.map(text))
        .with_rebalance_timeout_ms(if joining {
            SESSION.as_millis() as i32
        } else {
            -1
        })
        .with_subscribed_topic_names(joining.then(|| vec![TopicName(text(TOPIC))]))
        .with_topic_partitions((epoch >= 0).then(|| {
            vec![
                TopicPartitions::default()
                    .with_topic_id(m.topic_id)
                    .with_partitions(m.partitions()),
            ]
        }));
    match s
        .client
        .call(
            to,
            ApiKey::ConsumerGroupHeartbeat,
            1,
            RequestKind::ConsumerGroupHeartbeat(req),
        )
        .await
    {
        Ok(ResponseKind::ConsumerGroupHeartbeat(r)) => {
            if r.error_code != 0 {
                tracing::debug!(member = %m.id, epoch, code = r.error_code, message = ?r.error_message, "heartbeat refused");
            } else {
                tracing::debug!(at = ?s.now(), member = %m.id, epoch, broker = to, answer_epoch = r.member_epoch, assignment = ?r.assignment.as_ref().map(|a| a.topic_partitions.iter().map(|t| t.partitions.clone()).collect::<Vec<_>>()), "heartbeat answered");
            }
            Some(r)
        }
        other => {
            tracing::debug!(member = %m.id, epoch, ?other, "heartbeat failed");
            s.lost_coordinator();
            None
        }
    }
}

/// Commits the position of owned partition `i` if it moved.
async fn commit(s: &mut Session, m: &mut Member, i: usize) {
    let (p, pos) = m.owned[i];
    if pos != m.committed[i] && s.commit(p, pos, m.epoch, &m.id).await {
        m.committed[i] = pos;
    }
}

/// Takes the coordinator's answer: new partitions start at their committed
/// offsets; revoked ones are let go of only after a while (a consumer's
/// revocation callback that takes its time), and meanwhile the member goes
/// on consuming them and listing them as owned in its heartbeats.
async fn reconcile(s: &mut Session, m: &mut Member, r: &ConsumerGroupHeartbeatResponse) {
    let Some(a) = &r.assignment else {
        return;
    };
    // The group subscribes to one topic: any topic of an answer is it.
    if let Some(t) = a.topic_partitions.first() {
        m.topic_id = t.topic_id;
    }
    let target: BTreeSet<i32> = a
        .topic_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().copied())
        .collect();
    let revoked: BTreeSet<i32> = m
        .partitions()
        .into_iter()
        .filter(|p| !target.contains(p))
        .collect();
    if m.revoking.is_empty() && !revoked.is_empty() {
        let ms = madsim::rand::thread_rng().gen_range(0..3000);
        m.release_at = s.now() + Duration::from_millis(ms);
    }
    m.revoking = revoked;
    let mut added = false;
    for p in target {
        if m.owned.iter().any(|(q, _)| *q == p) {
            continue;
        }
        let Some(offset) = s.committed(p).await else {
            continue; // taken at the next answer that names it
        };
        m.owned.push((p, offset.max(0)));
        m.committed.push(offset.max(0));
        added = true;
    }
    if added {
        holds(s, m);
    }
}

/// Lets go of the revoked partitions once their time came: commits them,
/// drops them. True if it did (the member says so at once).
async fn release(s: &mut Session, m: &mut Member) -> bool {
    if m.revoking.is_empty() || s.now() < m.release_at {
        return false;
    }
    let mut i = 0;
    while i < m.owned.len() {
        if !m.revoking.contains(&m.owned[i].0) {
            i += 1;
            continue;
        }
        commit(s, m, i).await;
        m.owned.remove(i);
        m.committed.remove(i);
    }
    m.revoking.clear();
    holds(s, m);
    true
}

/// One member of [`NEXT_GROUP`] until `until`.
pub(crate) async fn next_member(mut s: Session, until: Duration) {
    s.group = NEXT_GROUP.to_owned();
    s.commit_version = 9;
    let name = s.name.clone();
    let instance = (name == "next-member-1").then(|| format!("static-{name}"));
    let mut m = Member::new(Uuid::nil());
    let mut last_beat: Option<Duration> = None;
    while s.now() < until {
        if !m.owned.is_empty() && s.now() >= m.lease {
            tracing::debug!(member = %m.id, "session lapsed: letting go");
            drop_all(&s, &mut m);
            m.epoch = 0;
        }
        if release(&mut s, &mut m).await {
            last_beat = None;
        }
        if last_beat.is_none_or(|b| s.now() >= b + HEARTBEAT) {
            if m.epoch > 0 && madsim::rand::thread_rng().gen_ratio(1, 40) {
                // Leaves (a static member for a while), then joins anew.
                for i in 0..m.owned.len() {
                    commit(&mut s, &mut m, i).await;
                }
                drop_all(&s, &mut m);
                let leave = if instance.is_some() { -2 } else { -1 };
                let _ = heartbeat(&mut s, &m, leave, instance.as_deref()).await;
                m = Member::new(m.topic_id);
            }
            let sent = s.now();
            last_beat = Some(sent);
            let Some(r) = heartbeat(&mut s, &m, m.epoch, instance.as_deref()).await else {
                continue;
            };
            match r.error_code {
                0 => {
                    m.epoch = r.member_epoch;
                    m.lease = sent + SESSION;
                    let before = m.partitions();
                    reconcile(&mut s, &mut m, &r).await;
                    if m.partitions() == before && !before.is_empty() {
                        holds(&s, &m); // the lease moved on
                    }
                }
                FENCED_MEMBER_EPOCH | UNKNOWN_MEMBER_ID => {
                    drop_all(&s, &mut m);
                    m.epoch = 0;
                }
                UNRELEASED_INSTANCE_ID => {}
                _ => s.lost_coordinator(),
            }
        }
        for i in 0..m.owned.len() {
            let (p, from) = m.owned[i];
            if let Some((got, _)) = s.fetch(TOPIC, p, from).await {
                if let Some(last) = got.last() {
                    m.owned[i].1 = last.0 + 1;
                }
                s.history.record(
                    s.now(),
                    Event::Poll {
                        client: name.clone(),
                        partition: p,
                        from,
                        got: got.into_iter().map(|(o, v, _)| (o, v)).collect(),
                    },
                );
            }
            if s.now() < m.lease {
                commit(&mut s, &mut m, i).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 0..m.owned.len() {
        commit(&mut s, &mut m, i).await;
    }
    drop_all(&s, &mut m);
    let _ = heartbeat(&mut s, &m, -1, instance.as_deref()).await;
}

/// Two members of a consumer-protocol group (KIP-848).
pub struct NextMembers;
pub static NEXT_MEMBERS: NextMembers = NextMembers;

impl Actor for NextMembers {
    fn name(&self) -> &'static str {
        "next-members"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("next-member-0"), Role::client("next-member-1")]
    }

    fn play(&self, _role: &'static str, s: Session, stage: &Stage) -> Play {
        Box::pin(next_member(s, stage.faults_end))
    }
}

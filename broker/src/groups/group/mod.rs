//! One consumer group's membership state machine (Kafka's classic
//! protocol): Empty → PreparingRebalance → CompletingRebalance → Stable.
//!
//! Pure state: no I/O and no clock of its own. The slot that owns the group
//! persists it (`store`) when a generation completes, when the group
//! empties and on every offset commit, and drives timeouts with `tick`.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::consumer::ConsumerGroup;
use super::store::OffsetRecord;

mod join;
mod stored;
mod txn;

pub use txn::{MarkerRefused, PendingOffsets, TxnMarker, TxnSnapshot};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Empty,
    Preparing,
    Completing,
    Stable,
}

impl Phase {
    /// The state names Kafka reports (DescribeGroups, ListGroups).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Empty => "Empty",
            Phase::Preparing => "PreparingRebalance",
            Phase::Completing => "CompletingRebalance",
            Phase::Stable => "Stable",
        }
    }
}

/// What a member's JoinGroup gets once the round completes.
#[derive(Clone, Debug, Default)]
pub struct JoinResult {
    pub error: i16,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Only for the leader: every member with its metadata for the protocol.
    pub members: Vec<(String, Option<String>, Bytes)>,
    /// The leader is told not to assign again (JoinGroup v9, KIP-814): a
    /// static leader rejoining a stable group keeps the assignment.
    pub skip_assignment: bool,
}

#[derive(Clone, Debug, Default)]
pub struct SyncResult {
    pub error: i16,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignment: Bytes,
}

pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    last_seen: Instant,
    /// Order of joining in the current round; `None` until it rejoined.
    joined: Option<u64>,
    join_waiter: Option<oneshot::Sender<JoinResult>>,
    sync_waiter: Option<oneshot::Sender<SyncResult>>,
}

/// A JoinGroup as the group sees it.
impl Member {
    /// What the leader learns of this member: id, instance id, and its
    /// metadata for the group's protocol.
    fn roster_entry(&self, protocol: Option<&String>) -> (String, Option<String>, Bytes) {
        let meta = self
            .protocols
            .iter()
            .find(|(n, _)| Some(n) == protocol)
            .map(|(_, b)| b.clone())
            .unwrap_or_default();
        (self.id.clone(), self.instance_id.clone(), meta)
    }
}

pub struct JoinRequest {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// KIP-394: v4+ clients must first ask for a member id.
    pub require_known_member_id: bool,
}

pub enum Joined {
    Now(JoinResult),
    Wait(oneshot::Receiver<JoinResult>),
}

pub enum Synced {
    Now(SyncResult),
    Wait(oneshot::Receiver<SyncResult>),
    /// The leader's assignment completed the round: persist, then answer.
    Complete(oneshot::Receiver<SyncResult>),
}

pub struct Group {
    pub id: String,
    pub phase: Phase,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    pub offsets: BTreeMap<(String, i32), OffsetRecord>,
    /// Producer id -> (epoch, offsets) committed in its open transaction.
    pub pending_txn: BTreeMap<i64, PendingOffsets>,
    /// Per producer id, the newest coordinator epoch of a marker applied.
    marker_epochs: BTreeMap<i64, i32>,
    /// Member ids handed out by MEMBER_ID_REQUIRED, valid until this instant.
    pending: BTreeMap<String, Instant>,
    join_counter: u64,
    round_deadline: Option<Instant>,
    initial_until: Option<Instant>,
    /// Set while the group is one of the consumer protocol (KIP-848); the
    /// classic fields above are then unused.
    pub consumer: Option<ConsumerGroup>,
}

fn err(e: ResponseError) -> i16 {
    e.code()
}

impl Group {
    pub fn new(id: &str) -> Self {
        Self {
            id: id.to_owned(),
            phase: Phase::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            offsets: BTreeMap::new(),
            pending_txn: BTreeMap::new(),
            marker_epochs: BTreeMap::new(),
            pending: BTreeMap::new(),
            join_counter: 0,
            round_deadline: None,
            initial_until: None,
            consumer: None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.phase == Phase::Empty && self.consumer.as_ref().is_none_or(|c| c.is_empty())
    }

    /// A group with members of the consumer protocol.
    pub fn is_consumer(&self) -> bool {
        self.consumer.as_ref().is_some_and(|c| !c.is_empty())
    }

    /// The group type ListGroups reports (KIP-848).
    pub fn group_type(&self) -> &'static str {
        if self.consumer.is_some() {
            "consumer"
        } else {
            "classic"
        }
    }

    /// The state DescribeGroups and ListGroups report.
    pub fn state_name(&self) -> &'static str {
        match &self.consumer {
            Some(c) => c.state_name(),
            None => self.phase.name(),
        }
    }

    /// Checks `member_id` (and its static instance id) against the group.
    pub(crate) fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), i16> {
        if let Some(instance) = instance_id {
            let holder = self
                .members
                .values()
                .find(|m| m.instance_id.as_deref() == Some(instance));
            if let Some(h) = holder {
                if h.id != member_id {
                    return Err(err(ResponseError::FencedInstanceId));
                }
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(err(ResponseError::UnknownMemberId))
        }
    }

    fn common_protocol_ok(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        // Some protocol every member (this one included) supports.
        protocols.iter().any(|(name, _)| {
            self.members
                .values()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
    }

    pub fn sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
        now: Instant,
    ) -> Synced {
        let now_result = |error: i16| {
            Synced::Now(SyncResult {
                error,
                ..SyncResult::default()
            })
        };
        if let Err(e) = self.check_member(member_id, instance_id) {
            return now_result(e);
        }
        if generation != self.generation {
            return now_result(err(ResponseError::IllegalGeneration));
        }
        let protocol_type = self.protocol_type.clone();
        let protocol = self.protocol.clone();
        match self.phase {
            Phase::Empty => now_result(err(ResponseError::UnknownMemberId)),
            Phase::Preparing => now_result(err(ResponseError::RebalanceInProgress)),
            Phase::Stable => {
                let assignment = match self.members.get_mut(member_id) {
                    Some(m) => {
                        m.last_seen = now;
                        m.assignment.clone()
                    }
                    None => Bytes::new(),
                };
                Synced::Now(SyncResult {
                    error: 0,
                    protocol_type,
                    protocol,
                    assignment,
                })
            }
            Phase::Completing => {
                let (tx, rx) = oneshot::channel();
                let is_leader = self.leader.as_deref() == Some(member_id);
                if let Some(m) = self.members.get_mut(member_id) {
                    m.last_seen = now;
                    m.sync_waiter = Some(tx);
                }
                if !is_leader {
                    return Synced::Wait(rx);
                }
                let mut given: BTreeMap<String, Bytes> = assignments.into_iter().collect();
                for m in self.members.values_mut() {
                    m.assignment = given.remove(&m.id).unwrap_or_default();
                }
                self.phase = Phase::Stable;
                Synced::Complete(rx)
            }
        }
    }

    /// Answers every member waiting in SyncGroup: with its assignment once
    /// the generation is persisted, or with `error` (the round is lost and
    /// they rejoin).
    pub(crate) fn release_sync(&mut self, error: i16, now: Instant, initial_delay: Duration) {
        if error != 0 {
            for m in self.members.values_mut() {
                if let Some(w) = m.sync_waiter.take() {
                    let _ = w.send(SyncResult {
                        error,
                        ..SyncResult::default()
                    });
                }
            }
            self.phase = Phase::Stable;
            self.start_rebalance(now, initial_delay);
            return;
        }
        for m in self.members.values_mut() {
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(SyncResult {
                    error: 0,
                    protocol_type: self.protocol_type.clone(),
                    protocol: self.protocol.clone(),
                    assignment: m.assignment.clone(),
                });
            }
        }
    }

    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> i16 {
        if self.phase == Phase::Empty {
            return err(ResponseError::UnknownMemberId);
        }
        if let Err(e) = self.check_member(member_id, instance_id) {
            return e;
        }
        if generation != self.generation {
            return err(ResponseError::IllegalGeneration);
        }
        if let Some(m) = self.members.get_mut(member_id) {
            m.last_seen = now;
        }
        if self.phase == Phase::Preparing {
            err(ResponseError::RebalanceInProgress)
        } else {
            0
        }
    }

    /// Removes members that leave; returns per-member errors, and whether
    /// the group became Empty (to be persisted).
    pub fn leave(
        &mut self,
        who: &[(String, Option<String>)],
        now: Instant,
        initial_delay: Duration,
    ) -> (Vec<i16>, bool) {
        let mut errors = Vec::with_capacity(who.len());
        let mut removed = false;
        for (member_id, instance) in who {
            let id = if member_id.is_empty() {
                // v3+ static members may leave by instance id alone.
                instance.as_ref().and_then(|i| {
                    self.members
                        .values()
                        .find(|m| m.instance_id.as_ref() == Some(i))
                        .map(|m| m.id.clone())
                })
            } else {
                Some(member_id.clone())
            };
            let Some(id) = id else {
                errors.push(err(ResponseError::UnknownMemberId));
                continue;
            };
            if let Err(e) = self.check_member(&id, instance.as_deref()) {
                errors.push(e);
                continue;
            }
            if let Some(mut m) = self.members.remove(&id) {
                fence_waiters(&mut m);
                removed = true;
            }
            errors.push(0);
        }
        let emptied = removed && self.after_removal(now, initial_delay);
        (errors, emptied)
    }

    fn after_removal(&mut self, now: Instant, initial_delay: Duration) -> bool {
        match self.phase {
            Phase::Stable | Phase::Completing => {
                if self.members.is_empty() {
                    self.generation += 1;
                    self.phase = Phase::Empty;
                    self.protocol = None;
                    self.leader = None;
                    return true;
                }
                self.start_rebalance(now, initial_delay);
                false
            }
            Phase::Preparing => self.maybe_complete_join(now),
            Phase::Empty => false,
        }
    }

    /// Expires silent members and pending member ids, and completes a round
    /// whose time is up. Returns true when the group became Empty.
    pub fn tick(&mut self, now: Instant, initial_delay: Duration) -> bool {
        self.pending.retain(|_, until| now < *until);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none() && now >= m.last_seen + m.session_timeout)
            .map(|m| m.id.clone())
            .collect();
        let mut emptied = false;
        if !expired.is_empty() {
            for id in &expired {
                if let Some(mut m) = self.members.remove(id) {
                    tracing::info!(group = %self.id, member = %id, "session expired");
                    fence_waiters(&mut m);
                }
            }
            emptied = self.after_removal(now, initial_delay);
        }
        emptied || self.maybe_complete_join(now)
    }

    /// May the caller commit offsets with this generation and member?
    pub(crate) fn check_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        version: i16,
    ) -> Result<(), i16> {
        if let Some(c) = &self.consumer {
            return c.check_commit(member_id, generation, version);
        }
        if generation < 0 && self.phase == Phase::Empty {
            return Ok(()); // manual assignment: no membership to check
        }
        if self.phase == Phase::Completing {
            return Err(err(ResponseError::RebalanceInProgress));
        }
        self.check_member(member_id, instance_id)?;
        if generation != self.generation {
            return Err(err(ResponseError::IllegalGeneration));
        }
        Ok(())
    }

    /// Topics the members subscribed to (consumer protocol only).
    pub(crate) fn subscribed(&self, topic: &str) -> bool {
        use kafka_protocol::messages::ConsumerProtocolSubscription;
        use kafka_protocol::protocol::Decodable;
        if let Some(c) = &self.consumer {
            return c.subscribed(topic);
        }
        if self.protocol_type.as_deref() != Some("consumer") {
            return false;
        }
        self.members.values().any(|m| {
            m.protocols
                .iter()
                .filter(|(n, _)| Some(n) == self.protocol.as_ref())
                .any(|(_, meta)| {
                    let mut buf = meta.clone();
                    if buf.len() < 2 {
                        return false;
                    }
                    let version = i16::from_be_bytes([buf[0], buf[1]]);
                    let _ = bytes::Buf::get_i16(&mut buf);
                    ConsumerProtocolSubscription::decode(&mut buf, version.clamp(0, 3))
                        .is_ok_and(|s| s.topics.iter().any(|t| t.as_str() == topic))
                })
        })
    }
}

/// A member that is gone (left, expired or replaced) stops waiting.
fn fence_waiters(m: &mut Member) {
    if let Some(w) = m.join_waiter.take() {
        let _ = w.send(JoinResult {
            error: err(ResponseError::UnknownMemberId),
            generation: -1,
            member_id: m.id.clone(),
            ..JoinResult::default()
        });
    }
    if let Some(w) = m.sync_waiter.take() {
        let _ = w.send(SyncResult {
            error: err(ResponseError::UnknownMemberId),
            ..SyncResult::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(member_id: &str) -> JoinRequest {
        JoinRequest {
            member_id: member_id.to_owned(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(30),
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"m"))],
            require_known_member_id: true,
        }
    }

    fn join_now(g: &mut Group, member: &str, now: Instant) -> Joined {
        let id = member.to_owned();
        g.join(req(member), now, move || id, Duration::ZERO)
    }

    #[tokio::test(start_paused = true)]
    async fn two_members_complete_a_generation_and_a_leave_rebalances() {
        let now = Instant::now();
        let mut g = Group::new("g");
        let Joined::Now(r) = g.join(req(""), now, || "a".into(), Duration::ZERO) else {
            panic!("member id required first")
        };
        assert_eq!(r.error, ResponseError::MemberIdRequired.code());
        let Joined::Wait(a) = join_now(&mut g, "a", now) else {
            panic!()
        };
        // Alone and past the (zero) initial delay: completes at once.
        let a = a.await.unwrap();
        assert_eq!((a.error, a.generation, a.leader.as_str()), (0, 1, "a"));
        assert_eq!(a.members.len(), 1);
        let Synced::Complete(s) = g.sync(
            "a",
            None,
            1,
            vec![("a".into(), Bytes::from_static(b"p0"))],
            now,
        ) else {
            panic!()
        };
        g.release_sync(0, now, Duration::ZERO);
        assert_eq!(s.await.unwrap().assignment, Bytes::from_static(b"p0"));
        assert_eq!(g.phase, Phase::Stable);

        // A second member: the first learns of the rebalance by heartbeat.
        g.pending.insert("b".into(), now + Duration::from_secs(10));
        let Joined::Wait(b) = join_now(&mut g, "b", now) else {
            panic!()
        };
        assert_eq!(
            g.heartbeat("a", None, 1, now),
            ResponseError::RebalanceInProgress.code()
        );
        let Joined::Wait(a) = join_now(&mut g, "a", now) else {
            panic!()
        };
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        assert_eq!((a.generation, b.generation), (2, 2));
        assert_eq!(a.members.len(), 2, "the leader gets the roster");
        assert!(b.members.is_empty());
        assert_eq!(
            g.check_commit("a", None, 1, 9),
            Err(ResponseError::RebalanceInProgress.code())
        );
        let Synced::Wait(sb) = g.sync("b", None, 2, vec![], now) else {
            panic!()
        };
        let Synced::Complete(sa) = g.sync(
            "a",
            None,
            2,
            vec![("b".into(), Bytes::from_static(b"p1"))],
            now,
        ) else {
            panic!()
        };
        g.release_sync(0, now, Duration::ZERO);
        assert_eq!(sb.await.unwrap().assignment, Bytes::from_static(b"p1"));
        assert!(
            sa.await.unwrap().assignment.is_empty(),
            "empty assignments are valid"
        );
        assert_eq!(
            g.check_commit("a", None, 1, 9),
            Err(ResponseError::IllegalGeneration.code())
        );
        assert_eq!(g.check_commit("a", None, 2, 9), Ok(()));
        assert_eq!(
            g.check_commit("zz", None, 2, 9),
            Err(ResponseError::UnknownMemberId.code())
        );

        let (errors, emptied) = g.leave(&[("b".into(), None)], now, Duration::ZERO);
        assert_eq!((errors, emptied), (vec![0], false));
        assert_eq!(g.phase, Phase::Preparing);
    }

    #[tokio::test(start_paused = true)]
    async fn silent_members_expire_and_the_round_completes_without_them() {
        let now = Instant::now();
        let delay = Duration::from_secs(1);
        let mut g = Group::new("g");
        for m in ["a", "b"] {
            g.pending.insert(m.into(), now + Duration::from_secs(10));
            let Joined::Wait(_) = g.join(req(m), now, || m.to_owned(), delay) else {
                panic!()
            };
        }
        assert_eq!(
            g.phase,
            Phase::Preparing,
            "a new group waits the initial delay"
        );
        assert!(!g.tick(now + delay, delay));
        assert_eq!(
            (g.phase, g.generation, g.members.len()),
            (Phase::Completing, 1, 2)
        );
        // Neither syncs nor heartbeats: both expire, the group empties.
        assert!(!g.tick(now + Duration::from_secs(5), delay));
        assert!(g.tick(now + Duration::from_secs(12), delay));
        assert_eq!((g.phase, g.generation), (Phase::Empty, 2));
        assert_eq!(
            g.check_commit("", None, -1, 9),
            Ok(()),
            "manual commits once empty"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_restarted_static_member_fences_its_old_id() {
        let now = Instant::now();
        let mut g = Group::new("g");
        let mut r = req("");
        r.instance_id = Some("host-1".into());
        let Joined::Wait(first) = g.join(r, now, || "old".into(), Duration::ZERO) else {
            panic!()
        };
        assert_eq!(first.await.unwrap().member_id, "old");
        let mut r = req("");
        r.instance_id = Some("host-1".into());
        let Joined::Wait(second) = g.join(r, now, || "new".into(), Duration::ZERO) else {
            panic!()
        };
        assert_eq!(second.await.unwrap().member_id, "new");
        assert_eq!(
            g.heartbeat("old", Some("host-1"), g.generation, now),
            ResponseError::FencedInstanceId.code()
        );
    }

    /// Two static members through one round: `(group, leader's id, other's id)`.
    async fn stable_static_pair(now: Instant) -> (Group, String, String) {
        let mut g = Group::new("g");
        let mut waits = Vec::new();
        for (host, id) in [("host-a", "a1"), ("host-b", "b1")] {
            let mut r = req("");
            r.instance_id = Some(host.into());
            let Joined::Wait(w) = g.join(r, now, || id.to_owned(), Duration::from_secs(1)) else {
                panic!()
            };
            waits.push(w);
        }
        assert!(!g.tick(now + Duration::from_secs(1), Duration::from_secs(1)));
        let joined: Vec<JoinResult> = vec![
            waits.remove(0).await.unwrap(),
            waits.remove(0).await.unwrap(),
        ];
        let leader = joined[0].leader.clone();
        let other = if leader == "a1" { "b1" } else { "a1" };
        let Synced::Wait(so) = g.sync(other, None, 1, vec![], now) else {
            panic!()
        };
        let given = vec![
            ("a1".to_owned(), Bytes::from_static(b"pa")),
            ("b1".to_owned(), Bytes::from_static(b"pb")),
        ];
        let Synced::Complete(sl) = g.sync(&leader, None, 1, given, now) else {
            panic!()
        };
        g.release_sync(0, now, Duration::ZERO);
        sl.await.unwrap();
        so.await.unwrap();
        assert_eq!((g.phase, g.generation), (Phase::Stable, 1));
        (g, leader, other.to_owned())
    }

    #[tokio::test(start_paused = true)]
    async fn a_static_member_restarting_into_a_stable_group_keeps_its_assignment_without_a_rebalance()
     {
        let now = Instant::now();
        let (mut g, leader, other) = stable_static_pair(now).await;
        let host = if other == "a1" { "host-a" } else { "host-b" };
        let mut r = req("");
        r.instance_id = Some(host.into());
        let Joined::Now(back) = g.join(r, now, || "restarted".into(), Duration::ZERO) else {
            panic!("a static rejoin with the same protocols waits for no rebalance")
        };
        assert_eq!(
            (back.error, back.generation, back.member_id.as_str()),
            (0, 1, "restarted")
        );
        assert_eq!(back.leader, leader);
        assert!(back.members.is_empty() && !back.skip_assignment);
        assert_eq!(
            (g.phase, g.generation),
            (Phase::Stable, 1),
            "nobody else rebalances"
        );
        assert_eq!(g.heartbeat(&leader, None, 1, now), 0);
        let Synced::Now(again) = g.sync("restarted", Some(host), 1, vec![], now) else {
            panic!()
        };
        let want = if other == "a1" {
            &b"pa"[..]
        } else {
            &b"pb"[..]
        };
        assert_eq!(again.assignment, Bytes::from_static(want));
        assert_eq!(
            g.heartbeat(&other, Some(host), 1, now),
            ResponseError::FencedInstanceId.code(),
            "the old process is fenced"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_static_leader_restarting_is_told_to_skip_the_assignment() {
        let now = Instant::now();
        let (mut g, leader, _) = stable_static_pair(now).await;
        let host = if leader == "a1" { "host-a" } else { "host-b" };
        let mut r = req("");
        r.instance_id = Some(host.into());
        let Joined::Now(back) = g.join(r, now, || "new-leader".into(), Duration::ZERO) else {
            panic!()
        };
        assert_eq!(
            (back.leader.as_str(), back.skip_assignment),
            ("new-leader", true)
        );
        assert_eq!(back.members.len(), 2, "the leader still learns the roster");
        assert_eq!(g.phase, Phase::Stable);
    }

    #[tokio::test(start_paused = true)]
    async fn a_static_member_coming_back_with_other_protocols_rebalances() {
        let now = Instant::now();
        let (mut g, _, other) = stable_static_pair(now).await;
        let host = if other == "a1" { "host-a" } else { "host-b" };
        let mut r = req("");
        r.instance_id = Some(host.into());
        r.protocols = vec![("range".into(), Bytes::from_static(b"other topics"))];
        let Joined::Wait(_) = g.join(r, now, || "changed".into(), Duration::ZERO) else {
            panic!("new subscriptions need a new assignment")
        };
        assert_eq!(g.phase, Phase::Preparing);
    }

    fn pend(g: &mut Group, pid: i64, epoch: i16, offset: i64) {
        let key = ("t".to_owned(), 0);
        let record = OffsetRecord {
            topic: key.0.clone(),
            partition: 0,
            offset,
            leader_epoch: -1,
            metadata: None,
            commit_ms: 0,
        };
        g.pending_txn.insert(pid, (epoch, [(key, record)].into()));
    }

    fn marker(coordinator_epoch: i32, producer_epoch: i16, commit: bool) -> TxnMarker {
        TxnMarker {
            producer_id: 7,
            producer_epoch,
            coordinator_epoch,
            commit,
        }
    }

    fn committed(g: &Group) -> Option<i64> {
        g.offsets.get(&("t".to_owned(), 0)).map(|o| o.offset)
    }

    /// Seed 183 of the swarm, on the group side: a deposed transaction
    /// coordinator's late marker must not end the offsets of a transaction
    /// its successor handles, even when the successor's own marker found
    /// nothing pending here.
    #[test]
    fn a_deposed_coordinators_marker_ends_nothing() {
        let mut g = Group::new("g");
        // The successor (coordinator epoch 3) ends a transaction without
        // offsets here: remembered all the same.
        assert_eq!(g.end_txn(marker(3, 0, true)), Ok(true));
        pend(&mut g, 7, 0, 10);
        assert_eq!(
            g.end_txn(marker(2, 1, false)),
            Err(MarkerRefused::ZombieCoordinator)
        );
        assert_eq!(g.pending_txn_partitions().len(), 1, "still pending");
        assert_eq!(g.end_txn(marker(3, 0, true)), Ok(true));
        assert_eq!(committed(&g), Some(10));
        // Survives the group file.
        let mut back = Group::from_record(g.record(), Instant::now());
        pend(&mut back, 7, 1, 20);
        assert_eq!(
            back.end_txn(marker(2, 1, true)),
            Err(MarkerRefused::ZombieCoordinator)
        );
        assert_eq!(committed(&back), Some(10));
    }

    #[test]
    fn a_marker_for_an_older_producer_epoch_leaves_the_newer_offsets_pending() {
        let mut g = Group::new("g");
        pend(&mut g, 7, 2, 10);
        assert_eq!(
            g.end_txn(marker(1, 1, true)),
            Err(MarkerRefused::StaleEpoch)
        );
        assert_eq!(committed(&g), None);
        // The coordinator's abort after it bumped the epoch ends them.
        assert_eq!(g.end_txn(marker(1, 3, false)), Ok(true));
        assert_eq!(committed(&g), None);
        assert!(g.pending_txn_partitions().is_empty());
        assert_eq!(g.end_txn(marker(1, 3, false)), Ok(false), "a repeat");
    }
}

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
mod tests;

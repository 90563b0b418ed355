//! A group of the consumer protocol (KIP-848): the coordinator assigns,
//! members reconcile by heartbeat.
//!
//! Pure state, like the classic `group`: the slot persists
//! [`ConsumerRecord`] (the group epoch, the target assignment, every
//! member's epoch and partitions) whenever a heartbeat, a leave or an
//! expiry changes it, and answers only after that. The safety rule is the
//! one Kafka's coordinator keeps: a partition goes to a member only while
//! no other member holds it, and a member holds a partition from the answer
//! that gave it until a heartbeat of that member says it no longer owns it
//! (or the member is gone). Because the holders are in the file, a new
//! coordinator keeps the rule across a takeover.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::assignor::{self, Tp};

/// Member epochs with a meaning of their own in a heartbeat.
pub const JOIN: i32 = 0;
pub const LEAVE: i32 = -1;
pub const STATIC_LEAVE: i32 = -2;

/// Topics as the coordinator sees them: name -> (topic id, partitions).
pub type Topics = BTreeMap<String, (String, u32)>;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerRecord {
    /// Bumped whenever membership, subscriptions or subscribed topics change.
    pub epoch: i32,
    /// The group epoch the target assignment was computed for.
    pub assignment_epoch: i32,
    /// The assignor of the current target.
    pub assignor: String,
    /// The subscribed topics the target was computed from.
    pub topics: Topics,
    pub members: BTreeMap<String, MemberState>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberState {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: Vec<String>,
    pub regex: Option<String>,
    pub server_assignor: Option<String>,
    pub rebalance_timeout_ms: u64,
    pub epoch: i32,
    pub previous_epoch: i32,
    /// What the member was last told it owns.
    pub assigned: BTreeSet<Tp>,
    /// Taken from it, but it has not said yet that it let go.
    pub revoking: BTreeSet<Tp>,
    /// Its part of the target assignment.
    pub target: BTreeSet<Tp>,
    /// A static member that left with epoch -2: it keeps its partitions
    /// until its session ends or its instance id joins again.
    pub left: bool,
}

/// A ConsumerGroupHeartbeat as the group sees it. `None` fields were not
/// sent (the member's previous value stands).
#[derive(Clone, Debug, Default)]
pub struct Beat {
    pub member_id: String,
    pub epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed: Option<Vec<String>>,
    pub regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<BTreeSet<Tp>>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub member_id: String,
    pub epoch: i32,
    /// The member's partitions, when it needs to hear them.
    pub assignment: Option<BTreeSet<Tp>>,
}

/// The coordinator's settings for consumer-protocol groups
/// (group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms).
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
}

pub type Refusal = (i16, String);

fn refuse(e: ResponseError, why: impl Into<String>) -> Refusal {
    (e.code(), why.into())
}

#[derive(Clone, Debug)]
struct Timers {
    last_seen: Instant,
    revoke_deadline: Option<Instant>,
    /// Past its revocation deadline: its heartbeats are refused (and no
    /// longer keep its session), its partitions stay its own until that
    /// session ends or it joins again, having let go of everything.
    fenced: bool,
}

#[derive(Clone, Debug, Default)]
pub struct ConsumerGroup {
    pub state: ConsumerRecord,
    timers: BTreeMap<String, Timers>,
}

/// `^(?:re)$`: Kafka matches a subscription regex against the whole name.
fn compile(re: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&format!("^(?:{re})$"))
}

impl ConsumerGroup {
    /// A group as a new coordinator finds it: every member gets a fresh
    /// session (and revocation deadline) from `now`.
    pub fn from_record(state: ConsumerRecord, now: Instant) -> Self {
        let timers = state
            .members
            .iter()
            .map(|(id, m)| {
                let deadline = (!m.revoking.is_empty())
                    .then(|| now + Duration::from_millis(m.rebalance_timeout_ms));
                (
                    id.clone(),
                    Timers {
                        last_seen: now,
                        revoke_deadline: deadline,
                        fenced: false,
                    },
                )
            })
            .collect();
        Self { state, timers }
    }

    pub fn is_empty(&self) -> bool {
        self.state.members.is_empty()
    }

    /// Kafka's consumer group states.
    pub fn state_name(&self) -> &'static str {
        let s = &self.state;
        if s.members.is_empty() {
            "Empty"
        } else if s.epoch > s.assignment_epoch {
            "Assigning"
        } else if s
            .members
            .values()
            .any(|m| m.epoch != s.assignment_epoch || m.assigned != m.target)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Whether some member subscribes to `topic` (OffsetDelete).
    pub fn subscribed(&self, topic: &str) -> bool {
        self.state.members.values().any(|m| {
            m.subscribed.iter().any(|t| t == topic)
                || m.regex
                    .as_deref()
                    .and_then(|r| compile(r).ok())
                    .is_some_and(|r| r.is_match(topic))
        })
    }

    /// May this member commit offsets with this epoch (OffsetCommit
    /// `generation_id_or_member_epoch`)? Kafka's rules: without a member
    /// epoch only into an empty group; a member of the consumer protocol
    /// commits with OffsetCommit v9+ and its current epoch.
    pub fn check_commit(&self, member_id: &str, epoch: i32, version: i16) -> Result<(), i16> {
        if epoch < 0 && self.is_empty() {
            return Ok(());
        }
        let Some(m) = self.state.members.get(member_id).filter(|m| !m.left) else {
            return Err(ResponseError::UnknownMemberId.code());
        };
        if version < 9 {
            return Err(ResponseError::UnsupportedVersion.code());
        }
        if epoch != m.epoch {
            return Err(ResponseError::StaleMemberEpoch.code());
        }
        Ok(())
    }

    /// OffsetFetch v9 with a member: it must be one, in its current epoch.
    pub fn check_fetch(&self, member_id: &str, epoch: i32) -> Result<(), i16> {
        match self.state.members.get(member_id).filter(|m| !m.left) {
            None => Err(ResponseError::UnknownMemberId.code()),
            Some(m) if m.epoch != epoch => Err(ResponseError::StaleMemberEpoch.code()),
            Some(_) => Ok(()),
        }
    }

    /// One heartbeat. `Ok` answers carry the member's new epoch; whether
    /// the state changed (and must be persisted before answering) is
    /// for the caller to see by comparing [`Self::state`].
    ///
    /// `now` is when the request arrived. A request of a member that arrived
    /// before one of that member already handled is stale: its client gave
    /// up on it (timed out, reconnected, asked again) and what it says, a
    /// join that would reset the member or owned partitions that would
    /// acknowledge a revocation, is no longer true. It changes nothing.
    pub fn heartbeat(&mut self, b: Beat, topics: &Topics, now: Instant) -> Result<Answer, Refusal> {
        if self
            .timers
            .get(&b.member_id)
            .is_some_and(|t| now < t.last_seen)
        {
            return Err(refuse(
                ResponseError::RequestTimedOut,
                "a newer request of this member was handled first",
            ));
        }
        match b.epoch {
            LEAVE | STATIC_LEAVE => self.leave(b, topics, now),
            JOIN => self.join(b, topics, now),
            e if e > 0 => self.beat(b, topics, now),
            e => Err(refuse(
                ResponseError::InvalidRequest,
                format!("member epoch {e} is not valid"),
            )),
        }
    }

    fn leave(&mut self, b: Beat, topics: &Topics, now: Instant) -> Result<Answer, Refusal> {
        let m = self.member(&b.member_id, b.instance_id.as_deref())?;
        let static_leave = b.epoch == STATIC_LEAVE && m.instance_id.is_some();
        if static_leave {
            if let Some(m) = self.state.members.get_mut(&b.member_id) {
                m.left = true;
            }
            self.seen(&b.member_id, now);
        } else {
            self.state.members.remove(&b.member_id);
            self.timers.remove(&b.member_id);
            self.state.epoch += 1;
            self.retarget(topics);
        }
        Ok(Answer {
            member_id: b.member_id,
            epoch: b.epoch,
            assignment: None,
        })
    }

    /// The member `id`, checked against its static instance id.
    fn member(&self, id: &str, instance: Option<&str>) -> Result<&MemberState, Refusal> {
        let m = self
            .state
            .members
            .get(id)
            .filter(|m| !m.left)
            .ok_or_else(|| {
                refuse(
                    ResponseError::UnknownMemberId,
                    format!("member {id} is not in the group"),
                )
            })?;
        if instance.is_some() && m.instance_id.as_deref() != instance {
            return Err(refuse(
                ResponseError::FencedInstanceId,
                format!("member {id} does not hold instance id {instance:?}"),
            ));
        }
        Ok(m)
    }

    fn join(&mut self, b: Beat, topics: &Topics, now: Instant) -> Result<Answer, Refusal> {
        if b.subscribed.is_none() && b.regex.is_none() {
            return Err(refuse(
                ResponseError::InvalidRequest,
                "SubscribedTopicNames or SubscribedTopicRegex must be set when joining",
            ));
        }
        if b.rebalance_timeout_ms < 0 {
            return Err(refuse(
                ResponseError::InvalidRequest,
                "RebalanceTimeoutMs must be set when joining",
            ));
        }
        self.check_fields(&b)?;
        let mut member = MemberState {
            previous_epoch: -1,
            ..MemberState::default()
        };
        // A static member coming back with the subscription it left with
        // changes nothing for the others: no new group epoch.
        let mut same_as_before = false;
        if let Some(instance) = &b.instance_id {
            let holder = self
                .state
                .members
                .iter()
                .find(|(_, m)| m.instance_id.as_deref() == Some(instance.as_str()))
                .map(|(id, m)| (id.clone(), m.left));
            match holder {
                Some((id, _)) if id == b.member_id => {}
                // The instance comes back under a new member id: it takes
                // over the partitions the old one kept while away.
                Some((id, true)) => {
                    if let Some(old) = self.state.members.remove(&id) {
                        self.timers.remove(&id);
                        same_as_before = b.subscribed.as_ref().is_none_or(|s| {
                            let mut s = s.clone();
                            s.sort();
                            s.dedup();
                            s == old.subscribed
                        }) && b
                            .regex
                            .as_ref()
                            .is_none_or(|r| Some(r) == old.regex.as_ref());
                        member = MemberState { left: false, ..old };
                    }
                }
                Some((id, false)) => {
                    return Err(refuse(
                        ResponseError::UnreleasedInstanceId,
                        format!("instance id {instance} is still held by member {id}"),
                    ));
                }
                None => {}
            }
        }
        // A member that joins again (epoch 0) after a fence has let go of
        // everything it held. A join with the id of a member that is in
        // the group, unfenced and holding partitions is older than that
        // member's heartbeats (a request a paused or cut-off broker took
        // up late) or comes from a client that dropped its partitions on
        // its own: taking it would hand its partitions to others while its
        // client may still use them. It waits for the session to end.
        let fenced = self.timers.get(&b.member_id).is_some_and(|t| t.fenced);
        if let Some(old) = self.state.members.get(&b.member_id) {
            if !fenced && old.epoch > 0 && !(old.assigned.is_empty() && old.revoking.is_empty()) {
                return Err(refuse(
                    ResponseError::FencedMemberEpoch,
                    format!(
                        "member {} is in the group at epoch {} holding partitions: a join \
                         with its id is taken only once it is fenced or its session ended",
                        b.member_id, old.epoch
                    ),
                ));
            }
        }
        if let Some(old) = self.state.members.remove(&b.member_id) {
            member = MemberState {
                epoch: 0,
                previous_epoch: -1,
                assigned: BTreeSet::new(),
                revoking: BTreeSet::new(),
                ..old
            };
        }
        self.state.members.insert(b.member_id.clone(), member);
        if let Some(t) = self.timers.get_mut(&b.member_id) {
            t.fenced = false;
            t.revoke_deadline = None;
        }
        self.update(&b, now);
        if !same_as_before || self.subscribed_topics(topics) != self.state.topics {
            self.state.epoch += 1;
        }
        self.retarget(topics);
        self.reconcile(&b.member_id, Some(&BTreeSet::new()), now);
        self.answer(&b.member_id, true)
    }

    fn check_fields(&self, b: &Beat) -> Result<(), Refusal> {
        if let Some(a) = &b.server_assignor {
            if !assignor::ASSIGNORS.contains(&a.as_str()) {
                return Err(refuse(
                    ResponseError::UnsupportedAssignor,
                    format!("assignor {a} is not one of {:?}", assignor::ASSIGNORS),
                ));
            }
        }
        if let Some(re) = &b.regex {
            if let Err(e) = compile(re) {
                return Err(refuse(
                    ResponseError::InvalidRegularExpression,
                    format!("{re}: {e}"),
                ));
            }
        }
        Ok(())
    }

    fn beat(&mut self, b: Beat, topics: &Topics, now: Instant) -> Result<Answer, Refusal> {
        let m = self.member(&b.member_id, b.instance_id.as_deref())?;
        if self.timers.get(&b.member_id).is_some_and(|t| t.fenced) {
            return Err(refuse(
                ResponseError::FencedMemberEpoch,
                "the member did not let go of revoked partitions within its rebalance timeout",
            ));
        }
        if b.epoch > m.epoch {
            return Err(refuse(
                ResponseError::FencedMemberEpoch,
                format!("epoch {} is newer than the member's {}", b.epoch, m.epoch),
            ));
        }
        // The answer that gave the member its current epoch may have been
        // lost: the previous epoch is accepted from a member that owns no
        // more than it was given.
        if b.epoch < m.epoch
            && (b.epoch != m.previous_epoch
                || !b.owned.as_ref().is_some_and(|o| o.is_subset(&m.assigned)))
        {
            return Err(refuse(
                ResponseError::FencedMemberEpoch,
                format!("epoch {} is older than the member's {}", b.epoch, m.epoch),
            ));
        }
        let current = b.epoch == m.epoch;
        self.check_fields(&b)?;
        let before = self.state.members.get(&b.member_id).cloned();
        self.update(&b, now);
        let after = self.state.members.get(&b.member_id);
        let resubscribed = before
            .as_ref()
            .map(|m| (&m.subscribed, &m.regex, &m.server_assignor))
            != after.map(|m| (&m.subscribed, &m.regex, &m.server_assignor));
        if resubscribed || self.subscribed_topics(topics) != self.state.topics {
            self.state.epoch += 1;
        }
        self.retarget(topics);
        // Only a heartbeat of the member's current epoch can acknowledge
        // the revocation that epoch's answer announced; one of the previous
        // epoch (its answer lost, or taken up late by a paused broker) says
        // what the member owned before it, and taking that as a release
        // hands the partitions on while the member still consumes them.
        let owned = b.owned.as_ref().filter(|_| current);
        let changed = self.reconcile(&b.member_id, owned, now);
        let full = b
            .owned
            .as_ref()
            .is_some_and(|o| Some(o) != self.state.members.get(&b.member_id).map(|m| &m.assigned));
        self.answer(&b.member_id, changed || full)
    }

    /// Takes the fields the heartbeat carries; absent ones stay.
    fn update(&mut self, b: &Beat, now: Instant) {
        if let Some(m) = self.state.members.get_mut(&b.member_id) {
            if let Some(s) = &b.subscribed {
                let mut s = s.clone();
                s.sort();
                s.dedup();
                m.subscribed = s;
            }
            if b.regex.is_some() {
                m.regex = b.regex.clone().filter(|r| !r.is_empty());
            }
            if b.server_assignor.is_some() {
                m.server_assignor = b.server_assignor.clone();
            }
            if b.rebalance_timeout_ms >= 0 {
                m.rebalance_timeout_ms = b.rebalance_timeout_ms as u64;
            }
            if b.rack_id.is_some() {
                m.rack_id = b.rack_id.clone();
            }
            if b.instance_id.is_some() {
                m.instance_id = b.instance_id.clone();
            }
            m.client_id = b.client_id.clone();
            m.client_host = b.client_host.clone();
        }
        self.seen(&b.member_id, now);
    }

    fn seen(&mut self, id: &str, now: Instant) {
        self.timers
            .entry(id.to_owned())
            .and_modify(|t| t.last_seen = t.last_seen.max(now))
            .or_insert(Timers {
                last_seen: now,
                revoke_deadline: None,
                fenced: false,
            });
    }

    fn answer(&self, id: &str, with_assignment: bool) -> Result<Answer, Refusal> {
        let m = self.state.members.get(id).ok_or_else(|| {
            refuse(
                ResponseError::UnknownMemberId,
                format!("member {id} is not in the group"),
            )
        })?;
        Ok(Answer {
            member_id: id.to_owned(),
            epoch: m.epoch,
            assignment: with_assignment.then(|| m.assigned.clone()),
        })
    }

    /// The topics the members subscribe to (by name or regex) that exist.
    fn subscribed_topics(&self, topics: &Topics) -> Topics {
        let mut out = Topics::new();
        for m in self.state.members.values() {
            for t in &m.subscribed {
                if let Some(v) = topics.get(t) {
                    out.insert(t.clone(), v.clone());
                }
            }
            if let Some(re) = m.regex.as_deref().and_then(|r| compile(r).ok()) {
                for (t, v) in topics.iter().filter(|(t, _)| re.is_match(t)) {
                    out.insert(t.clone(), v.clone());
                }
            }
        }
        out
    }

    /// A new target for the group epoch if it has none yet.
    fn retarget(&mut self, topics: &Topics) {
        if self.state.assignment_epoch >= self.state.epoch {
            return;
        }
        let subscribed = self.subscribed_topics(topics);
        let mut subscriptions = BTreeMap::new();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for (id, m) in &self.state.members {
            let re = m.regex.as_deref().and_then(|r| compile(r).ok());
            let mine: BTreeSet<String> = subscribed
                .keys()
                .filter(|t| m.subscribed.contains(t) || re.as_ref().is_some_and(|r| r.is_match(t)))
                .cloned()
                .collect();
            subscriptions.insert(id.clone(), mine);
            if let Some(a) = &m.server_assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        // The assignor most members ask for; uniform when nobody asks.
        let name = votes
            .iter()
            .max_by_key(|(name, n)| (**n, std::cmp::Reverse(**name)))
            .map_or(assignor::UNIFORM, |(name, _)| *name)
            .to_owned();
        let partitions: BTreeMap<String, u32> = subscribed
            .iter()
            .map(|(t, (_, n))| (t.clone(), *n))
            .collect();
        let previous: BTreeMap<String, BTreeSet<Tp>> = self
            .state
            .members
            .iter()
            .map(|(id, m)| (id.clone(), m.target.clone()))
            .collect();
        let target = assignor::assign(
            &name,
            &assignor::Input {
                subscriptions: &subscriptions,
                partitions: &partitions,
                previous: &previous,
            },
        );
        for (id, m) in self.state.members.iter_mut() {
            m.target = target.get(id).cloned().unwrap_or_default();
        }
        self.state.assignor = name;
        self.state.topics = subscribed;
        self.state.assignment_epoch = self.state.epoch;
    }

    /// Whether a member other than `id` holds `tp` (owns it or has not
    /// acknowledged its revocation).
    fn held_by_other(&self, tp: &Tp, id: &str) -> bool {
        self.state
            .members
            .iter()
            .any(|(other, m)| other != id && (m.assigned.contains(tp) || m.revoking.contains(tp)))
    }

    /// Moves the member one step towards its target. `owned`: the
    /// partitions its heartbeat says it owns, if it said. True if the
    /// member's state changed.
    fn reconcile(&mut self, id: &str, owned: Option<&BTreeSet<Tp>>, now: Instant) -> bool {
        let assignment_epoch = self.state.assignment_epoch;
        let Some(before) = self.state.members.get(id).cloned() else {
            return false;
        };
        let mut m = before.clone();
        if !m.revoking.is_empty() {
            match owned {
                Some(o) if o.is_disjoint(&m.revoking) => m.revoking.clear(),
                _ => return false,
            }
        }
        if m.epoch < assignment_epoch {
            let revoke: BTreeSet<Tp> = m.assigned.difference(&m.target).cloned().collect();
            if !revoke.is_empty() {
                m.assigned.retain(|tp| !revoke.contains(tp));
                m.revoking = revoke;
                let deadline = now + Duration::from_millis(m.rebalance_timeout_ms);
                if let Some(t) = self.timers.get_mut(id) {
                    t.revoke_deadline = Some(deadline);
                }
                self.state.members.insert(id.to_owned(), m);
                return true;
            }
            m.previous_epoch = m.epoch;
            m.epoch = assignment_epoch;
        }
        if let Some(t) = self.timers.get_mut(id) {
            t.revoke_deadline = None;
        }
        let wanted: Vec<Tp> = m.target.difference(&m.assigned).cloned().collect();
        for tp in wanted {
            if !self.held_by_other(&tp, id) {
                m.assigned.insert(tp);
            }
        }
        let changed = m != before;
        self.state.members.insert(id.to_owned(), m);
        changed
    }

    /// Fences members that did not let go of revoked partitions within
    /// their rebalance timeout, and removes members whose session ended.
    /// A fenced member keeps its partitions until then: its client may
    /// still be using them, and stops only once its own session lapses.
    /// True if the group changed (the caller persists it).
    pub fn tick(&mut self, now: Instant, settings: Settings, topics: &Topics) -> bool {
        for (id, t) in self.timers.iter_mut() {
            if !t.fenced && t.revoke_deadline.is_some_and(|d| now >= d) {
                tracing::info!(member = %id, "consumer group member fenced: revoked partitions not released within its rebalance timeout");
                t.fenced = true;
            }
        }
        let expired: Vec<String> = self
            .timers
            .iter()
            .filter(|(_, t)| now >= t.last_seen + settings.session_timeout)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            tracing::info!(member = %id, "consumer group member removed: its session timed out");
            self.state.members.remove(id);
            self.timers.remove(id);
        }
        if expired.is_empty() {
            return false;
        }
        self.state.epoch += 1;
        self.retarget(topics);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Settings = Settings {
        session_timeout: Duration::from_secs(45),
        heartbeat_interval: Duration::from_secs(5),
    };

    fn topics(of: &[(&str, u32)]) -> Topics {
        of.iter()
            .enumerate()
            .map(|(i, (t, n))| (t.to_string(), (format!("id-{i}"), *n)))
            .collect()
    }

    fn join(id: &str, subscribed: &[&str]) -> Beat {
        Beat {
            member_id: id.into(),
            epoch: JOIN,
            rebalance_timeout_ms: 30_000,
            subscribed: Some(subscribed.iter().map(|s| s.to_string()).collect()),
            ..Beat::default()
        }
    }

    fn beat(id: &str, epoch: i32, owned: &BTreeSet<Tp>) -> Beat {
        Beat {
            member_id: id.into(),
            epoch,
            rebalance_timeout_ms: -1,
            owned: Some(owned.clone()),
            ..Beat::default()
        }
    }

    /// No partition is held by two members.
    fn exclusive(g: &ConsumerGroup) {
        let mut seen = BTreeSet::new();
        for m in g.state.members.values() {
            for tp in m.assigned.iter().chain(&m.revoking) {
                assert!(seen.insert(tp.clone()), "{tp:?} held twice: {:?}", g.state);
            }
        }
    }

    #[tokio::test]
    async fn a_second_member_gets_partitions_only_after_the_first_lets_go() {
        let now = Instant::now();
        let t = topics(&[("t", 4)]);
        let mut g = ConsumerGroup::default();
        let a = g.heartbeat(join("a", &["t"]), &t, now).unwrap();
        assert_eq!(a.epoch, 1);
        let a_owns = a.assignment.unwrap();
        assert_eq!(a_owns.len(), 4);
        // b joins: a new target splits the topic, but a still holds all.
        let b = g.heartbeat(join("b", &["t"]), &t, now).unwrap();
        assert_eq!(b.epoch, 2);
        assert_eq!(b.assignment, Some(BTreeSet::new()));
        exclusive(&g);
        // a is told to give up two; its epoch waits for its acknowledgement.
        let a2 = g.heartbeat(beat("a", 1, &a_owns), &t, now).unwrap();
        assert_eq!(a2.epoch, 1);
        let kept = a2.assignment.unwrap();
        assert_eq!(kept.len(), 2);
        exclusive(&g);
        // Until a acknowledges, b gets nothing.
        let b2 = g
            .heartbeat(beat("b", 2, &BTreeSet::new()), &t, now)
            .unwrap();
        assert!(b2.assignment.is_none_or(|a| a.is_empty()));
        let a3 = g.heartbeat(beat("a", 1, &kept), &t, now).unwrap();
        assert_eq!(a3.epoch, 2);
        let b3 = g
            .heartbeat(beat("b", 2, &BTreeSet::new()), &t, now)
            .unwrap();
        assert_eq!(b3.assignment.unwrap().len(), 2);
        exclusive(&g);
        assert_eq!(g.state_name(), "Stable");
    }

    #[tokio::test]
    async fn a_late_join_does_not_take_a_live_members_partitions() {
        let now = Instant::now();
        let t = topics(&[("t", 2)]);
        let mut g = ConsumerGroup::default();
        let a = g.heartbeat(join("a", &["t"]), &t, now).unwrap();
        let owned = a.assignment.unwrap();
        assert_eq!(owned.len(), 2);
        g.heartbeat(beat("a", a.epoch, &owned), &t, now).unwrap();
        // The join a sent first, taken up only now (its broker was paused).
        let err = g.heartbeat(join("a", &["t"]), &t, now).unwrap_err().0;
        assert_eq!(err, ResponseError::FencedMemberEpoch.code());
        let b = g.heartbeat(join("b", &["t"]), &t, now).unwrap();
        assert_eq!(b.assignment.unwrap().len(), 0, "a still holds both");
        exclusive(&g);
        // Once its session ended, a may join again.
        let later = now + Duration::from_secs(3600);
        g.tick(later, S, &t);
        assert!(g.heartbeat(join("a", &["t"]), &t, later).is_ok());
        exclusive(&g);
    }

    #[tokio::test]
    async fn epochs_are_checked_and_a_lost_answer_is_forgiven() {
        let now = Instant::now();
        let t = topics(&[("t", 2)]);
        let mut g = ConsumerGroup::default();
        let a = g.heartbeat(join("a", &["t"]), &t, now).unwrap();
        let owned = a.assignment.unwrap();
        let err = |r: Result<Answer, Refusal>| r.unwrap_err().0;
        assert_eq!(
            err(g.heartbeat(beat("a", 5, &owned), &t, now)),
            ResponseError::FencedMemberEpoch.code()
        );
        assert_eq!(
            err(g.heartbeat(beat("x", 1, &owned), &t, now)),
            ResponseError::UnknownMemberId.code()
        );
        // b joins and leaves: a's epoch moves to 3 while its answer is lost.
        g.heartbeat(join("b", &["t"]), &t, now).unwrap();
        let mut leave = beat("b", LEAVE, &BTreeSet::new());
        leave.owned = None;
        g.heartbeat(leave, &t, now).unwrap();
        let a2 = g.heartbeat(beat("a", 1, &owned), &t, now).unwrap();
        assert_eq!(a2.epoch, 3);
        // The answer was lost: a comes back with epoch 1 and what it owns.
        let again = g.heartbeat(beat("a", 1, &owned), &t, now).unwrap();
        assert_eq!(again.epoch, 3);
        // Epoch 2 was never a's: fenced.
        assert_eq!(
            err(g.heartbeat(beat("a", 2, &owned), &t, now)),
            ResponseError::FencedMemberEpoch.code()
        );
        assert_eq!(g.check_commit("a", 3, 9), Ok(()));
        assert_eq!(
            g.check_commit("a", 1, 9),
            Err(ResponseError::StaleMemberEpoch.code())
        );
        assert_eq!(
            g.check_commit("a", 3, 8),
            Err(ResponseError::UnsupportedVersion.code())
        );
    }

    #[tokio::test]
    async fn a_stale_join_does_not_reset_a_member() {
        let now = Instant::now();
        let t = topics(&[("t", 2)]);
        let mut g = ConsumerGroup::default();
        let a = g.heartbeat(join("a", &["t"]), &t, now).unwrap();
        let owned = a.assignment.unwrap();
        assert_eq!(owned.len(), 2);
        // A join that arrived before the one answered (its client gave up
        // on it) is handled only now: refused, a keeps its partitions.
        let stale = g.heartbeat(join("a", &["t"]), &t, now - Duration::from_millis(1));
        assert_eq!(stale.unwrap_err().0, ResponseError::RequestTimedOut.code());
        assert_eq!(g.state.members["a"].assigned, owned);
        let b = g.heartbeat(join("b", &["t"]), &t, now).unwrap();
        assert_eq!(b.assignment, Some(BTreeSet::new()));
    }

    #[tokio::test]
    async fn a_silent_member_expires_and_its_partitions_move() {
        let now = Instant::now();
        let t = topics(&[("t", 2)]);
        let mut g = ConsumerGroup::default();
        g.heartbeat(join("a", &["t"]), &t, now).unwrap();
        let b = g.heartbeat(join("b", &["t"]), &t, now).unwrap();
        assert_eq!(b.assignment, Some(BTreeSet::new()));
        let later = now + Duration::from_secs(30);
        let b2 = g
            .heartbeat(beat("b", b.epoch, &BTreeSet::new()), &t, later)
            .unwrap();
        assert!(b2.assignment.is_none_or(|a| a.is_empty()));
        assert!(g.tick(now + Duration::from_secs(46), S, &t));
        assert!(!g.state.members.contains_key("a"));
        let b3 = g
            .heartbeat(beat("b", b.epoch, &BTreeSet::new()), &t, later)
            .unwrap();
        assert_eq!(b3.assignment.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_member_slow_to_let_go_is_fenced_but_keeps_its_partitions_until_its_session_ends() {
        let now = Instant::now();
        let t = topics(&[("t", 2)]);
        let mut g = ConsumerGroup::default();
        let a = g.heartbeat(join("a", &["t"]), &t, now).unwrap();
        let owned = a.assignment.unwrap();
        let b = g.heartbeat(join("b", &["t"]), &t, now).unwrap();
        g.heartbeat(beat("a", a.epoch, &owned), &t, now).unwrap();
        // a heartbeats on without letting go, past its rebalance timeout.
        let late = now + Duration::from_secs(31);
        g.heartbeat(
            beat("a", a.epoch, &owned),
            &t,
            now + Duration::from_secs(20),
        )
        .unwrap();
        assert!(!g.tick(late, S, &t));
        assert_eq!(
            g.heartbeat(beat("a", a.epoch, &owned), &t, late)
                .unwrap_err()
                .0,
            ResponseError::FencedMemberEpoch.code()
        );
        let none = BTreeSet::new();
        let b2 = g.heartbeat(beat("b", b.epoch, &none), &t, late).unwrap();
        assert!(b2.assignment.is_none_or(|a| a.is_empty()), "a still holds");
        // Its session (from its last accepted heartbeat) ends: b gets all.
        let ended = now + Duration::from_secs(20) + S.session_timeout;
        assert!(g.tick(ended, S, &t));
        let b3 = g.heartbeat(beat("b", b.epoch, &none), &t, ended).unwrap();
        assert_eq!(b3.assignment.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_static_member_comes_back_to_its_partitions() {
        let now = Instant::now();
        let t = topics(&[("t", 2)]);
        let mut g = ConsumerGroup::default();
        let mut j = join("a", &["t"]);
        j.instance_id = Some("i".into());
        let a = g.heartbeat(j, &t, now).unwrap();
        let owned = a.assignment.unwrap();
        let mut leave = beat("a", STATIC_LEAVE, &owned);
        leave.instance_id = Some("i".into());
        g.heartbeat(leave, &t, now).unwrap();
        // The instance comes back under a new member id to its partitions;
        // a third process with the same instance id is refused.
        let mut j2 = join("a2", &["t"]);
        j2.instance_id = Some("i".into());
        let back = g.heartbeat(j2.clone(), &t, now).unwrap();
        assert_eq!(back.assignment, Some(owned));
        let mut j3 = join("a3", &["t"]);
        j3.instance_id = Some("i".into());
        assert_eq!(
            g.heartbeat(j3, &t, now).unwrap_err().0,
            ResponseError::UnreleasedInstanceId.code()
        );
    }

    #[tokio::test]
    async fn the_state_survives_a_takeover() {
        let now = Instant::now();
        let t = topics(&[("t", 2)]);
        let mut g = ConsumerGroup::default();
        let a = g.heartbeat(join("a", &["t"]), &t, now).unwrap();
        let json = serde_json::to_string(&g.state).unwrap();
        let mut again = ConsumerGroup::from_record(serde_json::from_str(&json).unwrap(), now);
        assert_eq!(again.state, g.state);
        let a2 = again
            .heartbeat(beat("a", a.epoch, &a.assignment.unwrap()), &t, now)
            .unwrap();
        assert_eq!(a2.epoch, a.epoch);
    }

    #[tokio::test]
    async fn a_regex_subscription_follows_new_topics() {
        let now = Instant::now();
        let mut g = ConsumerGroup::default();
        let mut j = join("a", &[]);
        j.subscribed = None;
        j.regex = Some("ev-.*".into());
        let t1 = topics(&[("ev-1", 1), ("other", 1)]);
        let a = g.heartbeat(j, &t1, now).unwrap();
        assert_eq!(a.assignment.clone().unwrap().len(), 1);
        let t2 = topics(&[("ev-1", 1), ("ev-2", 2), ("other", 1)]);
        let mut b = beat("a", a.epoch, &a.assignment.unwrap());
        b.owned = None;
        let a2 = g.heartbeat(b, &t2, now).unwrap();
        assert_eq!(a2.epoch, a.epoch + 1);
        assert_eq!(a2.assignment.unwrap().len(), 3);
        let mut bad = join("b", &[]);
        bad.regex = Some("(".into());
        assert_eq!(
            g.heartbeat(bad, &t2, now).unwrap_err().0,
            ResponseError::InvalidRegularExpression.code()
        );
    }
}

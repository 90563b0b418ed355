//! Joining a classic group: JoinGroup, the rebalance it starts, and the
//! round that completes when every member has joined (or its deadline).

use std::time::Duration;

use tokio::time::Instant;

use super::*;

impl Group {
    pub fn join(
        &mut self,
        req: JoinRequest,
        now: Instant,
        new_member_id: impl FnOnce() -> String,
        initial_delay: Duration,
    ) -> Joined {
        let fail = |error: i16, member_id: String| {
            Joined::Now(JoinResult {
                error,
                member_id,
                generation: -1,
                ..JoinResult::default()
            })
        };
        if self.is_consumer() || !self.common_protocol_ok(&req.protocol_type, &req.protocols) {
            return fail(err(ResponseError::InconsistentGroupProtocol), req.member_id);
        }
        // An empty group of the consumer protocol becomes a classic one.
        self.consumer = None;
        let member_id = if req.member_id.is_empty() {
            let id = new_member_id();
            if let Some(instance) = &req.instance_id {
                // A static member restarting: its new id replaces the old
                // one, and the old one is fenced from now on.
                let old = self
                    .members
                    .values()
                    .find(|m| m.instance_id.as_deref() == Some(instance.as_str()))
                    .map(|m| m.id.clone());
                if let Some(old) = old {
                    if let Some(mut m) = self.members.remove(&old) {
                        fence_waiters(&mut m);
                        m.id = id.clone();
                        if self.leader.as_deref() == Some(old.as_str()) {
                            self.leader = Some(id.clone());
                        }
                        self.members.insert(id.clone(), m);
                    }
                    if let Some(rejoined) = self.static_rejoin(&id, &req, now) {
                        return Joined::Now(rejoined);
                    }
                }
            } else if req.require_known_member_id {
                self.pending.insert(id.clone(), now + req.session_timeout);
                return fail(err(ResponseError::MemberIdRequired), id);
            }
            id
        } else {
            if let Err(e) = self.check_member_or_pending(&req.member_id, req.instance_id.as_deref())
            {
                return fail(e, req.member_id);
            }
            req.member_id.clone()
        };
        self.pending.remove(&member_id);
        let (tx, rx) = oneshot::channel();
        self.join_counter += 1;
        let order = self.join_counter;
        let member = self
            .members
            .entry(member_id.clone())
            .or_insert_with(|| Member {
                id: member_id.clone(),
                instance_id: req.instance_id.clone(),
                client_id: req.client_id.clone(),
                client_host: req.client_host.clone(),
                session_timeout: req.session_timeout,
                rebalance_timeout: req.rebalance_timeout,
                protocols: Vec::new(),
                assignment: Bytes::new(),
                last_seen: now,
                joined: None,
                join_waiter: None,
                sync_waiter: None,
            });
        member.protocols = req.protocols;
        member.session_timeout = req.session_timeout;
        member.rebalance_timeout = req.rebalance_timeout;
        member.last_seen = now;
        member.joined = Some(order);
        if let Some(old) = member.join_waiter.replace(tx) {
            // The client gave up on its earlier join and sent another.
            let _ = old.send(JoinResult {
                error: err(ResponseError::RebalanceInProgress),
                generation: -1,
                member_id: member_id.clone(),
                ..JoinResult::default()
            });
        }
        self.protocol_type = Some(req.protocol_type);
        self.start_rebalance(now, initial_delay);
        self.maybe_complete_join(now);
        Joined::Wait(rx)
    }

    /// KIP-345: a static member that comes back (a restart within its
    /// session timeout) to a stable group with the same protocols keeps its
    /// assignment, and nobody else rebalances: it is answered at once with
    /// the current generation and syncs to its old assignment. The leader
    /// gets the members but is told to skip the assignment (v9+; before,
    /// its SyncGroup in a stable group returns the current assignment).
    fn static_rejoin(&mut self, id: &str, req: &JoinRequest, now: Instant) -> Option<JoinResult> {
        if self.phase != Phase::Stable {
            return None;
        }
        let m = self.members.get_mut(id)?;
        if m.protocols != req.protocols {
            return None;
        }
        m.session_timeout = req.session_timeout;
        m.rebalance_timeout = req.rebalance_timeout;
        m.client_id = req.client_id.clone();
        m.last_seen = now;
        let leader = self.leader.clone().unwrap_or_default();
        let is_leader = leader == id;
        let protocol = self.protocol.clone();
        let members = if is_leader {
            self.members
                .values()
                .map(|m| m.roster_entry(protocol.as_ref()))
                .collect()
        } else {
            Vec::new()
        };
        Some(JoinResult {
            error: 0,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol,
            leader,
            member_id: id.to_owned(),
            members,
            skip_assignment: is_leader,
        })
    }

    fn check_member_or_pending(&self, member_id: &str, instance: Option<&str>) -> Result<(), i16> {
        if self.pending.contains_key(member_id) {
            return Ok(());
        }
        self.check_member(member_id, instance)
    }

    /// Moves to PreparingRebalance (no-op if already there). Members that
    /// are waiting for their assignment are told to rejoin.
    pub(super) fn start_rebalance(&mut self, now: Instant, initial_delay: Duration) {
        if self.phase == Phase::Preparing {
            return;
        }
        if self.phase == Phase::Empty {
            self.initial_until = Some(now + initial_delay);
        }
        for m in self.members.values_mut() {
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(SyncResult {
                    error: err(ResponseError::RebalanceInProgress),
                    ..SyncResult::default()
                });
            }
        }
        let longest = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::ZERO);
        self.round_deadline = Some(now + longest);
        self.phase = Phase::Preparing;
    }

    /// Completes the round once every member rejoined (after the initial
    /// delay of a new group), or at the deadline without the stragglers.
    /// Returns true when the group became Empty (to be persisted).
    pub(super) fn maybe_complete_join(&mut self, now: Instant) -> bool {
        if self.phase != Phase::Preparing {
            return false;
        }
        let all_joined = self.members.values().all(|m| m.joined.is_some());
        let delayed = self.initial_until.is_some_and(|t| now < t);
        let overdue = self.round_deadline.is_some_and(|t| now >= t);
        if !(overdue || (all_joined && !delayed)) {
            return false;
        }
        self.members.retain(|_, m| m.joined.is_some());
        self.initial_until = None;
        self.round_deadline = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            self.protocol = None;
            self.leader = None;
            return true;
        }
        let by_order = {
            let mut v: Vec<&Member> = self.members.values().collect();
            v.sort_by_key(|m| m.joined);
            v
        };
        let leader = match &self.leader {
            Some(l) if self.members.contains_key(l) => l.clone(),
            _ => by_order[0].id.clone(),
        };
        // The leader's most preferred protocol that every member supports.
        let protocol = self.members[&leader]
            .protocols
            .iter()
            .map(|(n, _)| n.clone())
            .find(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            });
        self.protocol = protocol.clone();
        self.leader = Some(leader.clone());
        self.phase = Phase::Completing;
        let roster: Vec<(String, Option<String>, Bytes)> = by_order
            .iter()
            .map(|m| m.roster_entry(protocol.as_ref()))
            .collect();
        let generation = self.generation;
        let protocol_type = self.protocol_type.clone();
        for m in self.members.values_mut() {
            m.joined = None;
            m.assignment = Bytes::new();
            m.last_seen = now;
            if let Some(w) = m.join_waiter.take() {
                let _ = w.send(JoinResult {
                    error: 0,
                    generation,
                    protocol_type: protocol_type.clone(),
                    protocol: protocol.clone(),
                    leader: leader.clone(),
                    member_id: m.id.clone(),
                    members: if m.id == leader {
                        roster.clone()
                    } else {
                        Vec::new()
                    },
                    skip_assignment: false,
                });
            }
        }
        false
    }
}

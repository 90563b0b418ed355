//! A group to and from the record its slot stores on the volume.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::{Group, Member, Phase};
use crate::groups::consumer::ConsumerGroup;
use crate::groups::store::{GroupRecord, MemberRecord, PendingTxnOffsets};

impl Group {
    /// A group as a new coordinator finds it on the volume: its members are
    /// given a fresh session from `now`, so they keep their generation.
    pub(crate) fn from_record(r: GroupRecord, now: Instant) -> Self {
        let mut g = Group::new(&r.group_id);
        g.generation = r.generation;
        g.protocol_type = r.protocol_type;
        g.protocol = r.protocol;
        g.leader = r.leader;
        g.offsets = r
            .offsets
            .into_iter()
            .map(|o| ((o.topic.clone(), o.partition), o))
            .collect();
        g.pending_txn = r
            .pending_txn
            .into_iter()
            .map(|p| {
                let offsets = p
                    .offsets
                    .into_iter()
                    .map(|o| ((o.topic.clone(), o.partition), o))
                    .collect();
                (p.producer_id, (p.producer_epoch, offsets))
            })
            .collect();
        g.marker_epochs = r.marker_epochs.into_iter().collect();
        for m in r.members {
            g.members.insert(
                m.member_id.clone(),
                Member {
                    id: m.member_id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout: Duration::from_millis(m.session_timeout_ms),
                    rebalance_timeout: Duration::from_millis(m.rebalance_timeout_ms),
                    protocols: m
                        .protocols
                        .into_iter()
                        .map(|(n, b)| (n, Bytes::from(b)))
                        .collect(),
                    assignment: Bytes::from(m.assignment),
                    last_seen: now,
                    joined: None,
                    join_waiter: None,
                    sync_waiter: None,
                },
            );
        }
        g.consumer = r.consumer.map(|c| ConsumerGroup::from_record(c, now));
        g.phase = if g.members.is_empty() {
            Phase::Empty
        } else {
            Phase::Stable
        };
        g
    }

    /// What goes to the volume: the completed generation and the offsets.
    pub fn record(&self) -> GroupRecord {
        let stable = matches!(self.phase, Phase::Stable | Phase::Preparing);
        GroupRecord {
            group_id: self.id.clone(),
            deleted: false,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader: self.leader.clone().filter(|_| stable),
            members: if stable {
                self.members
                    .values()
                    .map(|m| MemberRecord {
                        member_id: m.id.clone(),
                        instance_id: m.instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        session_timeout_ms: m.session_timeout.as_millis() as u64,
                        rebalance_timeout_ms: m.rebalance_timeout.as_millis() as u64,
                        protocols: m
                            .protocols
                            .iter()
                            .map(|(n, b)| (n.clone(), b.to_vec()))
                            .collect(),
                        assignment: m.assignment.to_vec(),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            offsets: self.offsets.values().cloned().collect(),
            consumer: self.consumer.as_ref().map(|c| c.state.clone()),
            pending_txn: self
                .pending_txn
                .iter()
                .map(|(pid, (epoch, offsets))| PendingTxnOffsets {
                    producer_id: *pid,
                    producer_epoch: *epoch,
                    offsets: offsets.values().cloned().collect(),
                })
                .collect(),
            marker_epochs: self.marker_epochs.iter().map(|(p, e)| (*p, *e)).collect(),
        }
    }
}

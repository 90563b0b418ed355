//! The offset APIs of groups: OffsetCommit, OffsetFetch, OffsetDelete.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::api::{code, opt, s};
use super::store::OffsetRecord;
use super::{Coordinators, Slot};

/// Kafka's offset.metadata.max.bytes.
const MAX_METADATA_BYTES: usize = 4096;

impl Coordinators {
    /// `unknown`: the partitions of the request that do not exist, answered
    /// UNKNOWN_TOPIC_OR_PARTITION and not committed, as Kafka does.
    pub async fn offset_commit(
        &self,
        req: OffsetCommitRequest,
        version: i16,
        unknown: &BTreeSet<(String, i32)>,
    ) -> OffsetCommitResponse {
        let group_id = req.group_id.as_str().to_owned();
        let outcome: Result<BTreeMap<(String, i32), i16>, i16> = async {
            let slot = self.slot_for(&group_id)?;
            let mut groups = slot.groups.lock().await;
            let generation = req.generation_id_or_member_epoch;
            let entry = match slot.entry(&mut groups, &group_id, generation < 0).await? {
                Some(e) => e,
                None => return Err(code(ResponseError::IllegalGeneration)),
            };
            entry.group.check_commit(
                req.member_id.as_str(),
                req.group_instance_id.as_ref().map(|i| i.as_str()),
                generation,
                version,
            )?;
            let now_ms = self.config.clock.now_ms();
            let mut errors = BTreeMap::new();
            let mut offsets = entry.group.offsets.clone();
            for t in &req.topics {
                for p in &t.partitions {
                    let key = (t.name.as_str().to_owned(), p.partition_index);
                    if unknown.contains(&key) {
                        errors.insert(key, code(ResponseError::UnknownTopicOrPartition));
                        continue;
                    }
                    let metadata = opt(&p.committed_metadata);
                    if metadata
                        .as_ref()
                        .is_some_and(|m| m.len() > MAX_METADATA_BYTES)
                    {
                        errors.insert(key, code(ResponseError::OffsetMetadataTooLarge));
                        continue;
                    }
                    offsets.insert(
                        key.clone(),
                        OffsetRecord {
                            topic: key.0.clone(),
                            partition: key.1,
                            offset: p.committed_offset,
                            leader_epoch: p.committed_leader_epoch,
                            metadata,
                            commit_ms: now_ms,
                        },
                    );
                    errors.insert(key, 0);
                }
            }
            // The new offsets count only once they are on the volume in this
            // epoch's file: persist a copy, adopt it after.
            let previous = std::mem::replace(&mut entry.group.offsets, offsets);
            let record = entry.group.record();
            if let Err(e) = slot.persist(entry, &record).await {
                entry.group.offsets = previous;
                return Err(e);
            }
            Ok(errors)
        }
        .await;
        let topics = req
            .topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                let error = match &outcome {
                                    Ok(map) => map
                                        .get(&(t.name.as_str().to_owned(), p.partition_index))
                                        .copied()
                                        .unwrap_or(0),
                                    Err(e) => *e,
                                };
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(error)
                            })
                            .collect(),
                    )
            })
            .collect();
        OffsetCommitResponse::default().with_topics(topics)
    }

    /// Committed offsets of one group: `topics` None means all of them.
    /// With `require_stable` (KIP-447, read_committed consumers), a
    /// partition with offsets of an open transaction is answered
    /// UNSTABLE_OFFSET_COMMIT, and the client asks again.
    async fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<Vec<(TopicName, Vec<i32>)>>,
        member: Option<(&str, i32)>,
        require_stable: bool,
    ) -> Result<Vec<(TopicName, Vec<Row>)>, i16> {
        let slot = self.slot_for(group_id)?;
        let mut groups = slot.groups.lock().await;
        let entry = slot.entry(&mut groups, group_id, false).await?;
        // v9 (KIP-848): a member of a consumer-protocol group asks in its
        // current epoch.
        if let Some((member_id, epoch)) = member {
            match entry.as_ref().and_then(|e| e.group.consumer.as_ref()) {
                Some(c) => c.check_fetch(member_id, epoch)?,
                None => return Err(code(ResponseError::UnknownMemberId)),
            }
        }
        let (committed, unstable): (BTreeMap<(String, i32), OffsetRecord>, BTreeSet<_>) =
            match entry {
                Some(e) => (e.group.offsets.clone(), e.group.pending_txn_partitions()),
                None => (BTreeMap::new(), BTreeSet::new()),
            };
        // Read first, then confirmed: a successor that took over in between
        // fails the confirmation, and one that did not acknowledged nothing.
        slot.confirm().await?;
        let error = |key: &(String, i32)| {
            if require_stable && unstable.contains(key) {
                code(ResponseError::UnstableOffsetCommit)
            } else {
                0
            }
        };
        Ok(match topics {
            Some(ts) => ts
                .into_iter()
                .map(|(name, parts)| {
                    let rows = parts
                        .into_iter()
                        .map(|p| {
                            let key = (name.as_str().to_owned(), p);
                            (p, committed.get(&key).cloned(), error(&key))
                        })
                        .collect();
                    (name, rows)
                })
                .collect(),
            None => {
                let mut by_topic: BTreeMap<String, Vec<Row>> = BTreeMap::new();
                for (key, r) in committed {
                    let e = error(&key);
                    by_topic.entry(key.0).or_default().push((key.1, Some(r), e));
                }
                by_topic
                    .into_iter()
                    .map(|(t, rows)| (TopicName(s(&t)), rows))
                    .collect()
            }
        })
    }

    pub async fn offset_fetch(&self, req: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
        if version >= 8 {
            let mut out = Vec::new();
            for g in req.groups {
                let asked = g.topics.map(|ts| {
                    ts.into_iter()
                        .map(|t| (t.name, t.partition_indexes))
                        .collect()
                });
                let group = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
                let member = g
                    .member_id
                    .as_ref()
                    .filter(|_| g.member_epoch >= 0)
                    .map(|m| (m.as_str(), g.member_epoch));
                out.push(
                    match self
                        .fetch_offsets(g.group_id.as_str(), asked, member, req.require_stable)
                        .await
                    {
                        Err(e) => group.with_error_code(e),
                        Ok(rows) => group.with_topics(
                            rows.into_iter()
                                .map(|(name, parts)| {
                                    OffsetFetchResponseTopics::default()
                                        .with_name(name)
                                        .with_partitions(
                                            parts
                                                .into_iter()
                                                .map(|(p, r, err)| {
                                                    let (o, e, m) = fields(r);
                                                    OffsetFetchResponsePartitions::default()
                                                        .with_error_code(err)
                                                        .with_partition_index(p)
                                                        .with_committed_offset(o)
                                                        .with_committed_leader_epoch(e)
                                                        .with_metadata(m)
                                                })
                                                .collect(),
                                        )
                                })
                                .collect(),
                        ),
                    },
                );
            }
            return OffsetFetchResponse::default().with_groups(out);
        }
        let asked = req.topics.map(|ts| {
            ts.into_iter()
                .map(|t| (t.name, t.partition_indexes))
                .collect()
        });
        match self
            .fetch_offsets(req.group_id.as_str(), asked, None, req.require_stable)
            .await
        {
            Err(e) if version >= 2 => OffsetFetchResponse::default().with_error_code(e),
            // v1 has no top-level error: an empty answer, and the client retries.
            Err(_) => OffsetFetchResponse::default(),
            Ok(rows) => OffsetFetchResponse::default().with_topics(
                rows.into_iter()
                    .map(|(name, parts)| {
                        OffsetFetchResponseTopic::default()
                            .with_name(name)
                            .with_partitions(
                                parts
                                    .into_iter()
                                    .map(|(p, r, err)| {
                                        let (o, e, m) = fields(r);
                                        OffsetFetchResponsePartition::default()
                                            .with_error_code(err)
                                            .with_partition_index(p)
                                            .with_committed_offset(o)
                                            .with_committed_leader_epoch(e)
                                            .with_metadata(m)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
        }
    }

    pub(crate) async fn offset_delete(&self, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
        let group_id = req.group_id.as_str().to_owned();
        let outcome: Result<Vec<OffsetDeleteResponseTopic>, i16> = async {
            let slot: std::sync::Arc<Slot> = self.slot_for(&group_id)?;
            let mut groups = slot.groups.lock().await;
            let Some(entry) = slot.entry(&mut groups, &group_id, false).await? else {
                return Err(code(ResponseError::GroupIdNotFound));
            };
            let mut topics = Vec::new();
            let mut offsets = entry.group.offsets.clone();
            for t in &req.topics {
                let subscribed = entry.group.subscribed(t.name.as_str());
                let mut parts = Vec::new();
                for p in &t.partitions {
                    let error = if subscribed {
                        code(ResponseError::GroupSubscribedToTopic)
                    } else {
                        offsets.remove(&(t.name.as_str().to_owned(), p.partition_index));
                        0
                    };
                    parts.push(
                        OffsetDeleteResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(error),
                    );
                }
                topics.push(
                    OffsetDeleteResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(parts),
                );
            }
            let previous = std::mem::replace(&mut entry.group.offsets, offsets);
            let record = entry.group.record();
            if let Err(e) = slot.persist(entry, &record).await {
                entry.group.offsets = previous;
                return Err(e);
            }
            Ok(topics)
        }
        .await;
        match outcome {
            Ok(topics) => OffsetDeleteResponse::default().with_topics(topics),
            Err(e) => OffsetDeleteResponse::default().with_error_code(e),
        }
    }
}

/// One partition of an OffsetFetch answer: its offset, if committed, and
/// its error code.
type Row = (i32, Option<OffsetRecord>, i16);

fn fields(r: Option<OffsetRecord>) -> (i64, i32, Option<StrBytes>) {
    match r {
        Some(r) => (
            r.offset,
            r.leader_epoch,
            Some(s(r.metadata.as_deref().unwrap_or(""))),
        ),
        None => (-1, -1, Some(StrBytes::default())),
    }
}

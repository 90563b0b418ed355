//! AlterPartitionReassignments, ListPartitionReassignments and ElectLeaders:
//! moving a partition's leadership to a named broker.
//!
//! A kaas partition has one copy, on the volume, and one replica: its
//! leader. A reassignment therefore names exactly one broker, which becomes
//! the partition's preferred leader (`cluster::preferred`); the controller
//! moves the partition there under a new leader epoch, as in a failover,
//! and keeps it there while that broker is live. A reassignment is ongoing
//! (ListPartitionReassignments) until the assignment names the preferred
//! broker as leader. ElectLeaders PREFERRED waits for such moves; a
//! partition without a preferred broker is already led by its preferred
//! replica (its one replica is its leader). UNCLEAN elections do not exist
//! here: every leader reads the same complete log, so UNCLEAN waits for a
//! partition without a live leader to get one, like PREFERRED.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ElectLeadersRequest, ElectLeadersResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{Api, code, lock, name_of, topic_name};
use crate::cluster::assignment::Assignment;
use crate::cluster::preferred::{self, PreferredLeaders};
use crate::log::topic;
use crate::security::versioned::ChangeError;

/// The longest an ElectLeaders request waits for its moves.
const ELECTION_WAIT: Duration = Duration::from_secs(30);

fn text(s: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.into()))
}

/// What one partition of an AlterPartitionReassignments request asks.
struct Ask {
    topic: String,
    topic_id: String,
    partition: u32,
    broker: Option<u32>,
}

/// The edit found nothing to change.
struct Unchanged;

type Outcome = (i16, Option<String>);

/// A partition an election names: its topic's name, its index, and its
/// topic id and partition or the error to answer.
type Named = (String, i32, Result<(String, u32), i16>);

impl Api {
    fn live(&self) -> Vec<u32> {
        self.current()
            .map(|a| a.brokers.keys().copied().collect())
            .unwrap_or_default()
    }

    pub(super) async fn alter_partition_reassignments(
        &self,
        r: AlterPartitionReassignmentsRequest,
    ) -> AlterPartitionReassignmentsResponse {
        let live = self.live();
        let mut outcomes: BTreeMap<(String, i32), Outcome> = BTreeMap::new();
        let mut asks = Vec::new();
        for t in &r.topics {
            let name = name_of(&t.name).to_owned();
            let meta = self.meta_named(&name).await;
            for p in &t.partitions {
                let key = (name.clone(), p.partition_index);
                let meta = match &meta {
                    Ok(m) => m,
                    Err(e) => {
                        outcomes.insert(key, (*e, None));
                        continue;
                    }
                };
                let partition = match u32::try_from(p.partition_index) {
                    Ok(i) if i < meta.partitions => i,
                    _ => {
                        outcomes.insert(key, (code(ResponseError::UnknownTopicOrPartition), None));
                        continue;
                    }
                };
                let broker = match p.replicas.as_deref() {
                    None => None,
                    Some(&[b]) if u32::try_from(b.0).is_ok_and(|b| live.contains(&b)) => {
                        Some(b.0 as u32)
                    }
                    Some(&[b]) => {
                        let why = format!("broker {} is not a live broker of this cluster", b.0);
                        outcomes.insert(
                            key,
                            (code(ResponseError::InvalidReplicaAssignment), Some(why)),
                        );
                        continue;
                    }
                    Some(list) => {
                        let why = format!(
                            "kaas keeps one copy of a partition, on the shared volume: a \
                             reassignment names exactly one broker, its leader ({} named)",
                            list.len()
                        );
                        outcomes.insert(
                            key,
                            (code(ResponseError::InvalidReplicaAssignment), Some(why)),
                        );
                        continue;
                    }
                };
                asks.push(Ask {
                    topic: name.clone(),
                    topic_id: meta.id.clone(),
                    partition,
                    broker,
                });
            }
        }
        if !asks.is_empty() {
            outcomes.extend(self.change_preferred(&asks).await);
            self.created.notify_one();
        }
        let mut topics: BTreeMap<String, Vec<ReassignablePartitionResponse>> = BTreeMap::new();
        for ((name, index), (error, message)) in outcomes {
            topics.entry(name).or_default().push(
                ReassignablePartitionResponse::default()
                    .with_partition_index(index)
                    .with_error_code(error)
                    .with_error_message(message.map(StrBytes::from_string)),
            );
        }
        AlterPartitionReassignmentsResponse::default()
            .with_allow_replication_factor_change(r.allow_replication_factor_change)
            .with_responses(
                topics
                    .into_iter()
                    .map(|(name, partitions)| {
                        ReassignableTopicResponse::default()
                            .with_name(topic_name(&name))
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
    }

    /// Writes the asked preferred leaders in one change; the outcome of
    /// each partition.
    async fn change_preferred(&self, asks: &[Ask]) -> Vec<((String, i32), Outcome)> {
        // Filled by the edit's last run: the one that was written.
        let not_in_progress = Mutex::new(Vec::new());
        let edit = |doc: &mut PreferredLeaders| {
            let mut missing = lock(&not_in_progress);
            missing.clear();
            let before = doc.clone();
            for a in asks {
                if doc.set(&a.topic_id, a.partition, a.broker).is_none() && a.broker.is_none() {
                    missing.push((a.topic.clone(), a.partition));
                }
            }
            if *doc == before {
                Err(Unchanged)
            } else {
                Ok(())
            }
        };
        let failed = match preferred::change(self.vfs.as_ref(), edit).await {
            Ok(_) | Err(ChangeError::Refused(Unchanged)) => None,
            Err(ChangeError::Volume(e)) => {
                let (error, message) = super::document_not_changed("preferred leaders", &e);
                Some((error, Some(message)))
            }
        };
        let missing = lock(&not_in_progress).clone();
        asks.iter()
            .map(|a| {
                let key = (a.topic.clone(), a.partition as i32);
                let outcome = match &failed {
                    Some(f) => f.clone(),
                    None if missing.contains(&(a.topic.clone(), a.partition)) => {
                        (code(ResponseError::NoReassignmentInProgress), None)
                    }
                    None => (0, None),
                };
                (key, outcome)
            })
            .collect()
    }

    /// The preferred leaders as on the volume now.
    async fn read_preferred(&self) -> Result<PreferredLeaders, (i16, String)> {
        let reader = preferred::reader();
        match reader.refresh(self.vfs.as_ref()).await {
            Ok(_) => Ok((*reader.get().1).clone()),
            Err(e) => Err((code(ResponseError::KafkaStorageError), e.to_string())),
        }
    }

    pub(super) async fn list_partition_reassignments(
        &self,
        r: ListPartitionReassignmentsRequest,
    ) -> ListPartitionReassignmentsResponse {
        let doc = match self.read_preferred().await {
            Ok(d) => d,
            Err((error, why)) => {
                return ListPartitionReassignmentsResponse::default()
                    .with_error_code(error)
                    .with_error_message(text(why));
            }
        };
        let assignment = self.current().unwrap_or_default();
        // Topic id -> (name, the partitions asked for; `None`: all).
        let mut wanted: BTreeMap<String, (String, Option<Vec<i32>>)> = BTreeMap::new();
        match &r.topics {
            Some(ts) => {
                for t in ts {
                    if let Ok(meta) = self.meta_named(name_of(&t.name)).await {
                        let name = meta.name.clone();
                        wanted.insert(meta.id, (name, Some(t.partition_indexes.clone())));
                    }
                }
            }
            None => {
                for id in doc.topics.keys() {
                    // A topic deleted since: nothing of it moves any more.
                    if let Ok(meta) = topic::read_meta(self.vfs.as_ref(), id).await {
                        wanted.insert(meta.id, (meta.name, None));
                    }
                }
            }
        }
        let mut topics = Vec::new();
        for (id, (name, partitions)) in wanted {
            let ongoing: Vec<OngoingPartitionReassignment> = doc
                .topics
                .get(&id)
                .into_iter()
                .flatten()
                .filter(|(p, _)| {
                    partitions
                        .as_ref()
                        .is_none_or(|ps| ps.contains(&(**p as i32)))
                })
                .filter_map(|(&p, &want)| {
                    let leader = assignment.leadership(&id, p).map(|l| l.leader);
                    (leader != Some(want)).then(|| {
                        OngoingPartitionReassignment::default()
                            .with_partition_index(p as i32)
                            .with_replicas(vec![BrokerId(want as i32)])
                            .with_adding_replicas(vec![BrokerId(want as i32)])
                            .with_removing_replicas(
                                leader.map(|l| BrokerId(l as i32)).into_iter().collect(),
                            )
                    })
                })
                .collect();
            if !ongoing.is_empty() {
                topics.push(
                    OngoingTopicReassignment::default()
                        .with_name(topic_name(&name))
                        .with_partitions(ongoing),
                );
            }
        }
        ListPartitionReassignmentsResponse::default().with_topics(topics)
    }

    pub(super) async fn elect_leaders(
        &self,
        r: ElectLeadersRequest,
        v: i16,
    ) -> ElectLeadersResponse {
        let doc = match self.read_preferred().await {
            Ok(d) => d,
            Err((error, why)) => {
                let mut refused = refused(&r, error, Some(why));
                if v < 1 {
                    refused.error_code = 0;
                }
                return refused;
            }
        };
        let unclean = v >= 1 && r.election_type == 1;
        let all = r.topic_partitions.is_none();
        // (name, partition) -> the topic id and partition, or the error.
        let mut asked: Vec<Named> = Vec::new();
        match &r.topic_partitions {
            Some(ts) => {
                for t in ts {
                    let name = name_of(&t.topic).to_owned();
                    let meta = self.meta_named(&name).await;
                    for &p in &t.partitions {
                        let key = match &meta {
                            Ok(m) => match u32::try_from(p) {
                                Ok(i) if i < m.partitions => Ok((m.id.clone(), i)),
                                _ => Err(code(ResponseError::UnknownTopicOrPartition)),
                            },
                            Err(e) => Err(*e),
                        };
                        asked.push((name.clone(), p, key));
                    }
                }
            }
            None => {
                let a = self.current().unwrap_or_default();
                let mut names: BTreeMap<String, Option<String>> = BTreeMap::new();
                for (id, p, _) in &a.partitions {
                    if let Some(name) = self.memo_name_by_id(&mut names, id).await {
                        asked.push((name, *p as i32, Ok((id.clone(), *p))));
                    }
                }
            }
        }
        let deadline = tokio::time::Instant::now()
            + Duration::from_millis(r.timeout_ms.max(0) as u64).min(ELECTION_WAIT);
        let mut watch = self.assignment.clone();
        let mut results: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
        for (name, p, key) in asked {
            let (error, message) = match key {
                Err(e) => (e, None),
                Ok((id, partition)) => {
                    let want = doc.get(&id, partition);
                    let mut waited = false;
                    loop {
                        let a = watch.borrow_and_update().clone().unwrap_or_default();
                        match judge(&a, &id, partition, want, unclean) {
                            // Moved while this request waited: elected.
                            Some((e, _))
                                if waited && e == code(ResponseError::ElectionNotNeeded) =>
                            {
                                break (0, None);
                            }
                            Some(verdict) => break verdict,
                            None => waited = true,
                        }
                        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                        let changed = tokio::time::timeout(left, watch.changed()).await;
                        if !matches!(changed, Ok(Ok(()))) {
                            break (
                                code(ResponseError::RequestTimedOut),
                                Some("the controller has not moved the partition yet".to_owned()),
                            );
                        }
                    }
                }
            };
            if all && error == code(ResponseError::ElectionNotNeeded) {
                continue;
            }
            results.entry(name).or_default().push(
                PartitionResult::default()
                    .with_partition_id(p)
                    .with_error_code(error)
                    .with_error_message(message.map(StrBytes::from_string)),
            );
        }
        ElectLeadersResponse::default().with_replica_election_results(
            results
                .into_iter()
                .map(|(name, partitions)| {
                    ReplicaElectionResult::default()
                        .with_topic(topic_name(&name))
                        .with_partition_result(partitions)
                })
                .collect(),
        )
    }
}

/// ElectLeaders refused as a whole (see `elect_leaders_refused`).
pub(super) fn refused(
    r: &ElectLeadersRequest,
    error: i16,
    message: Option<String>,
) -> ElectLeadersResponse {
    crate::protocol::unsupported::elect_leaders_refused(r, error, message)
}

/// An election's answer as the assignment `a` stands, or `None` while the
/// controller has yet to move the partition.
fn judge(
    a: &Assignment,
    id: &str,
    partition: u32,
    want: Option<u32>,
    unclean: bool,
) -> Option<(i16, Option<String>)> {
    let leader = a.leadership(id, partition).map(|l| l.leader);
    let live = |b: u32| a.brokers.contains_key(&b);
    if unclean {
        return match leader {
            Some(l) if live(l) => Some((code(ResponseError::ElectionNotNeeded), None)),
            _ if a.brokers.is_empty() => Some((
                code(ResponseError::EligibleLeadersNotAvailable),
                Some("no broker is live".to_owned()),
            )),
            _ => None,
        };
    }
    match want {
        // Its one replica is its leader: the preferred one already leads.
        None => Some((code(ResponseError::ElectionNotNeeded), None)),
        Some(w) if leader == Some(w) => Some((code(ResponseError::ElectionNotNeeded), None)),
        Some(w) if !live(w) => Some((
            code(ResponseError::PreferredLeaderNotAvailable),
            Some(format!("preferred broker {w} is not live")),
        )),
        Some(_) => None,
    }
}

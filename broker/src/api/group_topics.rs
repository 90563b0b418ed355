//! The topics a consumer-protocol group is assigned from
//! (ConsumerGroupHeartbeat, ConsumerGroupDescribe).

use std::collections::BTreeMap;

use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
};

use super::{Api, is_internal, lock, topic};
use crate::groups::consumer::Topics;

impl Api {
    /// Every topic of the controller's current assignment with its
    /// partition count there: a partition is handed to a member only once
    /// it has a leader. Names come from each topic's meta, read once per
    /// topic id (an id's name never changes).
    pub(super) async fn assigned_topics(&self) -> Topics {
        let Some(a) = self.current() else {
            return Topics::new();
        };
        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        for (id, p, _) in &a.partitions {
            let n = counts.entry(id.as_str()).or_default();
            *n = (*n).max(p + 1);
        }
        let mut out = Topics::new();
        for (id, n) in counts {
            let known = lock(&self.topic_names).get(id).cloned();
            let name = match known {
                Some(name) => name,
                None => match topic::read_meta(self.vfs.as_ref(), id).await {
                    Ok(meta) => {
                        lock(&self.topic_names).insert(id.to_owned(), meta.name.clone());
                        meta.name
                    }
                    // Deleted meanwhile, or unreadable for now: not offered
                    // to groups until the next heartbeat.
                    Err(_) => continue,
                },
            };
            if !is_internal(&name) {
                out.insert(name, (id.to_owned(), n));
            }
        }
        let live: std::collections::BTreeSet<&String> = out.values().map(|(id, _)| id).collect();
        lock(&self.topic_names).retain(|id, _| live.contains(id));
        out
    }

    pub(super) async fn consumer_group_heartbeat(
        &self,
        req: ConsumerGroupHeartbeatRequest,
        version: i16,
        client_id: &str,
    ) -> ConsumerGroupHeartbeatResponse {
        let arrived = tokio::time::Instant::now();
        let topics = self.assigned_topics().await;
        self.coordinators
            .consumer_group_heartbeat(req, version, client_id, &topics, arrived)
            .await
    }

    pub(super) async fn consumer_group_describe(
        &self,
        req: ConsumerGroupDescribeRequest,
    ) -> ConsumerGroupDescribeResponse {
        let topics = self.assigned_topics().await;
        self.coordinators
            .consumer_group_describe(req, &topics)
            .await
    }
}

//! The topics a consumer-protocol group is assigned from
//! (ConsumerGroupHeartbeat, ConsumerGroupDescribe).

use std::collections::BTreeMap;

use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
};

use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::StrBytes;

use super::{Api, code, is_internal, lock, topic};
use crate::groups::consumer::Topics;

impl Api {
    /// Every topic of the controller's current assignment with its
    /// partition count there: a partition is handed to a member only once
    /// it has a leader. Names come from each topic's meta, read once per
    /// topic id (an id's name never changes).
    ///
    /// An error when there is no assignment yet or a topic's meta cannot
    /// be read: a topic missing from the answer would look deleted, and the
    /// group would take its partitions from its members.
    pub(super) async fn assigned_topics(&self) -> Result<Topics, i16> {
        let Some(a) = self.current() else {
            return Err(code(ResponseError::CoordinatorNotAvailable));
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
                    // Deleted since the assignment was written.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => {
                        tracing::warn!(topic_id = id, error = %e, "topic meta unreadable; group heartbeat refused for now");
                        return Err(code(ResponseError::CoordinatorNotAvailable));
                    }
                },
            };
            if !is_internal(&name) {
                out.insert(name, (id.to_owned(), n));
            }
        }
        let live: std::collections::BTreeSet<&String> = out.values().map(|(id, _)| id).collect();
        lock(&self.topic_names).retain(|id, _| live.contains(id));
        Ok(out)
    }

    pub(super) async fn consumer_group_heartbeat(
        &self,
        req: ConsumerGroupHeartbeatRequest,
        version: i16,
        client_id: &str,
    ) -> ConsumerGroupHeartbeatResponse {
        let arrived = tokio::time::Instant::now();
        // Held here, a request falls behind the member's next one (its
        // client timed out and asked again): a stale request.
        vfs::fault_point!(self.vfs, "group-heartbeat.arrived");
        let topics = match self.assigned_topics().await {
            Ok(t) => t,
            Err(e) => {
                return ConsumerGroupHeartbeatResponse::default()
                    .with_error_code(e)
                    .with_error_message(Some(StrBytes::from_static_str(
                        "the cluster's topics cannot be read now",
                    )))
                    .with_member_epoch(-1);
            }
        };
        self.coordinators
            .consumer_group_heartbeat(req, version, client_id, &topics, arrived)
            .await
    }

    pub(super) async fn consumer_group_describe(
        &self,
        req: ConsumerGroupDescribeRequest,
    ) -> ConsumerGroupDescribeResponse {
        // Names for the ids are best effort here: an unreadable topic is
        // described by its id alone.
        let topics = self.assigned_topics().await.unwrap_or_default();
        self.coordinators
            .consumer_group_describe(req, &topics)
            .await
    }
}

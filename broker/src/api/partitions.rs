//! CreatePartitions: a topic grows, partition by partition.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::log::topic;

use super::topics::{MAX_NEW_PARTITIONS_PER_REQUEST, excessive};
use super::{Api, code, name_of};

impl Api {
    pub(super) async fn create_partitions(
        &self,
        req: CreatePartitionsRequest,
    ) -> CreatePartitionsResponse {
        let mut results = Vec::new();
        let mut grown = Vec::new();
        // New partitions granted so far in this request: a topic whose
        // growth would pass Kafka's per-request limit is refused.
        let mut added_so_far: i64 = 0;
        for t in req.topics {
            let name = name_of(&t.name).to_owned();
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            let fail = |e: ResponseError, why: String| {
                CreatePartitionsTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(code(e))
                    .with_error_message(Some(StrBytes::from_string(why)))
            };
            let result = match topic::lookup(self.vfs.as_ref(), &name).await {
                Ok(None) => fail(
                    ResponseError::UnknownTopicOrPartition,
                    format!("no topic {name}"),
                ),
                Err(e) => fail(ResponseError::KafkaStorageError, e.to_string()),
                Ok(Some(meta)) if t.count <= meta.partitions as i32 => fail(
                    ResponseError::InvalidPartitions,
                    format!(
                        "{name} has {} partitions; the count can only grow",
                        meta.partitions
                    ),
                ),
                Ok(Some(meta))
                    if added_so_far + i64::from(t.count) - i64::from(meta.partitions)
                        > MAX_NEW_PARTITIONS_PER_REQUEST =>
                {
                    fail(
                        ResponseError::PolicyViolation,
                        excessive(added_so_far + i64::from(t.count) - i64::from(meta.partitions)),
                    )
                }
                Ok(Some(meta)) if req.validate_only => {
                    added_so_far += i64::from(t.count) - i64::from(meta.partitions);
                    result
                }
                Ok(Some(meta)) => {
                    let live = self.current().map(|a| a.brokers).unwrap_or_default();
                    let creator = self.creator();
                    let added = topic::add_partitions(
                        self.vfs.as_ref(),
                        &creator,
                        &live,
                        &meta,
                        t.count as u32,
                    );
                    added_so_far += i64::from(t.count) - i64::from(meta.partitions);
                    match added.await {
                        Ok(()) => {
                            grown.push((meta.id.clone(), t.count as u32));
                            result
                        }
                        Err(e) => fail(ResponseError::KafkaStorageError, e.to_string()),
                    }
                }
            };
            results.push(result);
        }
        self.await_leaders_within(&grown, req.timeout_ms).await;
        CreatePartitionsResponse::default().with_results(results)
    }
}

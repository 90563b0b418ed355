//! DeleteRecords: moves a partition's log start offset.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::log::LogError;

use super::{Api, code, name_of};

impl Api {
    pub(super) async fn delete_records(&self, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
        let mut topics = Vec::new();
        for t in req.topics {
            let name = name_of(&t.name).to_owned();
            let mut parts = Vec::new();
            for p in t.partitions {
                let r = DeleteRecordsPartitionResult::default()
                    .with_partition_index(p.partition_index)
                    .with_low_watermark(-1);
                let r = match self.log_for(&name, p.partition_index).await {
                    Err(c) => r.with_error_code(c),
                    Ok(log) => match log.delete_records(p.offset).await {
                        Ok(start) => r.with_low_watermark(start),
                        Err(LogError::OutOfRange { .. }) => {
                            r.with_error_code(code(ResponseError::OffsetOutOfRange))
                        }
                        // Another broker leads now; the client asks it.
                        Err(LogError::Fenced(_)) => {
                            r.with_error_code(code(ResponseError::NotLeaderOrFollower))
                        }
                        Err(_) => r.with_error_code(code(ResponseError::KafkaStorageError)),
                    },
                };
                parts.push(r);
            }
            topics.push(
                DeleteRecordsTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(parts),
            );
        }
        DeleteRecordsResponse::default().with_topics(topics)
    }
}

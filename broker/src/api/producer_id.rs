//! InitProducerId: producer ids for idempotent producers (transactional
//! ones: `txn`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{Api, code};

impl Api {
    /// InitProducerId for idempotent producers: a fresh id, or (KIP-360)
    /// the same id with the next epoch when the producer asks to bump.
    /// A transactional producer's is answered by its coordinator (`txn`).
    pub(super) async fn init_producer_id(
        &self,
        req: InitProducerIdRequest,
    ) -> InitProducerIdResponse {
        if let Some(id) = &req.transactional_id {
            return self.init_txn_producer_id(&req, id.0.as_str()).await;
        }
        let resp = InitProducerIdResponse::default()
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        if req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX - 1 {
            return resp
                .with_producer_id(req.producer_id)
                .with_producer_epoch(req.producer_epoch + 1);
        }
        match self.producer_ids.allocate().await {
            Ok(id) => resp.with_producer_id(ProducerId(id)).with_producer_epoch(0),
            Err(e) => {
                tracing::warn!(error = %e, "no producer id");
                resp.with_error_code(code(ResponseError::CoordinatorNotAvailable))
            }
        }
    }
}

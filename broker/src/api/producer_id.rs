//! InitProducerId: producer ids for idempotent producers.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{Api, code};

impl Api {
    /// InitProducerId for idempotent producers: a fresh id, or (KIP-360)
    /// the same id with the next epoch when the producer asks to bump.
    /// Transactions are not served.
    pub(super) async fn init_producer_id(
        &self,
        req: InitProducerIdRequest,
    ) -> InitProducerIdResponse {
        let resp = InitProducerIdResponse::default()
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        if req.transactional_id.is_some() {
            tracing::warn!(
                "InitProducerId with a transactional id: transactions are not supported"
            );
            return resp.with_error_code(code(ResponseError::InvalidRequest));
        }
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

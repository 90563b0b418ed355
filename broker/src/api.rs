//! The broker's answers to Kafka requests.

use kafka_protocol::messages::{RequestHeader, RequestKind, ResponseKind};

use crate::protocol::{Handler, versions};

/// The request handler of one broker.
#[derive(Default)]
pub struct Api;

#[async_trait::async_trait]
impl Handler for Api {
    async fn handle(
        &self,
        header: &RequestHeader,
        request: RequestKind,
    ) -> Result<ResponseKind, String> {
        match request {
            RequestKind::ApiVersions(_) => Ok(ResponseKind::ApiVersions(
                versions::api_versions(header.request_api_version).0,
            )),
            other => Err(format!("no handler for {other:?}")),
        }
    }
}

//! FindCoordinator: the broker leading a group's (or transactional id's)
//! coordinator slot.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use crate::groups;

use super::{Api, code, split_host_port};

impl Api {
    /// FindCoordinator: the broker leading the key's coordinator slot.
    /// Groups and transactional ids share the slots.
    pub(super) fn find_coordinator(
        &self,
        req: FindCoordinatorRequest,
        version: i16,
        listener: &str,
    ) -> FindCoordinatorResponse {
        let a = self.current();
        // 0: a group, 1: a transactional id (both in the coordinator slots);
        // 2 (v6+) is a share group's partition, which kaas has none of.
        let key_type = req.key_type;
        let locate = |key: &str| -> Result<(i32, String, i32), i16> {
            if !(0..=1).contains(&key_type) {
                return Err(code(ResponseError::InvalidRequest));
            }
            let a = a
                .as_ref()
                .ok_or(code(ResponseError::CoordinatorNotAvailable))?;
            let l = a
                .coordinator(groups::slot_of(key))
                .ok_or(code(ResponseError::CoordinatorNotAvailable))?;
            let b = a
                .brokers
                .get(&l.leader)
                .ok_or(code(ResponseError::CoordinatorNotAvailable))?;
            let endpoint = b
                .endpoint(listener)
                .ok_or(code(ResponseError::CoordinatorNotAvailable))?;
            let (host, port) = split_host_port(endpoint);
            Ok((l.leader as i32, host, port))
        };
        if version >= 4 {
            let coordinators = req
                .coordinator_keys
                .iter()
                .map(|k| {
                    let c = Coordinator::default().with_key(k.clone());
                    match locate(k.as_str()) {
                        Ok((id, host, port)) => c
                            .with_node_id(BrokerId(id))
                            .with_host(StrBytes::from_string(host))
                            .with_port(port),
                        Err(e) => c
                            .with_error_code(e)
                            .with_error_message(error_message(e, key_type))
                            .with_node_id(BrokerId(-1))
                            .with_port(-1),
                    }
                })
                .collect();
            return FindCoordinatorResponse::default().with_coordinators(coordinators);
        }
        match locate(req.key.as_str()) {
            Ok((id, host, port)) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(id))
                .with_host(StrBytes::from_string(host))
                .with_port(port),
            Err(e) => FindCoordinatorResponse::default()
                .with_error_code(e)
                .with_error_message(error_message(e, key_type))
                .with_node_id(BrokerId(-1))
                .with_port(-1),
        }
    }
}

fn error_message(e: i16, key_type: i8) -> Option<StrBytes> {
    (e == code(ResponseError::InvalidRequest))
        .then(|| StrBytes::from_string(format!("unsupported coordinator key type {key_type}")))
}

//! Kafka sends `error_message` null where nothing failed; kafka-protocol's
//! defaults for some responses are an empty string instead, which clients
//! show as an error with no text (or, comparing with null, as an error).

use kafka_protocol::messages::ResponseKind;

/// Clears every `error_message` whose `error_code` is 0.
pub(super) fn null_messages_on_success(response: &mut ResponseKind) {
    macro_rules! clear {
        ($item:expr) => {
            if $item.error_code == 0 {
                $item.error_message = None;
            }
        };
    }
    match response {
        ResponseKind::CreateTopics(r) => r.topics.iter_mut().for_each(|t| clear!(t)),
        ResponseKind::DescribeConfigs(r) => r.results.iter_mut().for_each(|t| clear!(t)),
        ResponseKind::AlterConfigs(r) => r.responses.iter_mut().for_each(|t| clear!(t)),
        ResponseKind::IncrementalAlterConfigs(r) => r.responses.iter_mut().for_each(|t| clear!(t)),
        ResponseKind::CreatePartitions(r) => r.results.iter_mut().for_each(|t| clear!(t)),
        ResponseKind::DeleteTopics(r) => r.responses.iter_mut().for_each(|t| clear!(t)),
        ResponseKind::DescribeGroups(r) => r.groups.iter_mut().for_each(|g| clear!(g)),
        ResponseKind::DescribeCluster(r) => clear!(r),
        ResponseKind::FindCoordinator(r) => {
            clear!(r);
            r.coordinators.iter_mut().for_each(|c| clear!(c));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    use kafka_protocol::messages::{CreateTopicsResponse, FindCoordinatorResponse};
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn only_successes_lose_their_message() {
        let failed = CreatableTopicResult::default()
            .with_error_code(36)
            .with_error_message(Some(StrBytes::from_static_str("exists")));
        let mut r = ResponseKind::CreateTopics(
            CreateTopicsResponse::default()
                .with_topics(vec![CreatableTopicResult::default(), failed.clone()]),
        );
        null_messages_on_success(&mut r);
        let ResponseKind::CreateTopics(r) = r else {
            unreachable!()
        };
        assert_eq!(r.topics[0].error_message, None);
        assert_eq!(r.topics[1], failed);

        let mut r = ResponseKind::FindCoordinator(FindCoordinatorResponse::default());
        null_messages_on_success(&mut r);
        let ResponseKind::FindCoordinator(r) = r else {
            unreachable!()
        };
        assert_eq!(r.error_message, None);
    }
}

//! What the workload's actors share: the topics and groups they write and
//! read, and how they ask for a topic.

use madsim::rand::Rng;

pub const TOPIC: &str = "events";
pub(crate) const PARTITIONS: i32 = 3;
pub(crate) const CHURN_TOPIC: &str = "churn";
/// Partitions of the churned topic: one per broker of a default run, so a
/// deletion touches every broker. Only partition 0 is written and read.
pub(crate) const CHURN_PARTITIONS: i32 = 3;
pub(crate) const GROUP: &str = "sim-group";
/// The committer's group (`committer`).
pub(crate) const COMMITTER_GROUP: &str = "sim-committer";

/// CreateTopics' timeout as clients send it: some wait for the new topic's
/// leaders (the Java admin, kafka-python), some do not (confluent-kafka's
/// default operation timeout is 0), and the broker answers at once then.
pub(crate) fn create_timeout_ms() -> i32 {
    if madsim::rand::thread_rng().gen_bool(0.5) {
        5000
    } else {
        0
    }
}

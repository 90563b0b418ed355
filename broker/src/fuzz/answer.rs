//! Requests answered by a whole broker: what the decoders hand on (counts,
//! sizes, offsets, names a client chose) reaching the code that acts on it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use vfs::{MemVfs, Vfs};

use crate::api::{Api, ApiConfig};
use crate::cluster::assignment::{Assignment, BrokerEntry, COORDINATOR_SLOTS};
use crate::cluster::placement::Leadership;
use crate::groups::{Coordinators, GroupConfig};
use crate::leaders::Leaders;
use crate::log::{LogConfig, topic};
use crate::protocol::connection::{Started, start};
use crate::security::{Security, SecurityConfig, Session};

/// However long a request may wait in the broker (a long-poll fetch, a
/// rebalance, CreateTopics waiting for a controller this harness does not
/// run): the clock is paused, so this passes at once when nothing else
/// can happen.
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

struct Base {
    vfs: MemVfs,
    topic: String,
}

thread_local! {
    static BASE: Base = super::block_on(base());
}

async fn base() -> Base {
    let vfs = MemVfs::new();
    let built = async {
        crate::node::prepare_volume(&vfs).await?;
        crate::cluster::identity::settle(&vfs, 0, Some("fuzz-cluster")).await?;
        topic::create_topic(&vfs, "t", 2)
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))
    };
    match built.await {
        Ok(meta) => Base {
            vfs,
            topic: meta.id,
        },
        Err(e) => panic!("cannot prepare the fuzz volume: {e}"),
    }
}

/// Broker 0 leading both partitions of topic `t` and every coordinator
/// slot, in epoch 1.
fn assignment(topic_id: &str) -> Assignment {
    let led = Leadership {
        leader: 0,
        leader_epoch: 1,
    };
    Assignment {
        controller_epoch: 1,
        version: 1,
        controller: 0,
        brokers: [(
            0,
            BrokerEntry {
                advertised: "127.0.0.1:9092".into(),
                incarnation: 1,
                endpoints: Default::default(),
            },
        )]
        .into(),
        partitions: (0..2).map(|p| (topic_id.to_owned(), p, led)).collect(),
        cluster_id: "fuzz-cluster".into(),
        coordinators: (0..COORDINATOR_SLOTS).map(|s| (s, led)).collect(),
        offline: Vec::new(),
    }
}

/// Up to four request frames (see `chunks`), answered in turn on one
/// connection of a broker on a fresh copy of a prepared volume.
pub fn request_answer(data: &[u8]) {
    // A runtime per input: the broker's background tasks end with it.
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    else {
        panic!("cannot build a runtime for the fuzz harness");
    };
    let (vfs, topic_id) = BASE.with(|b| (b.vfs.snapshot(), b.topic.clone()));
    rt.block_on(async {
        let vfs: Arc<dyn Vfs> = Arc::new(vfs);
        let a = assignment(&topic_id);
        let leaders = Arc::new(Leaders::new(vfs.clone(), 0, LogConfig::default()));
        let coordinators = Arc::new(Coordinators::new(
            vfs.clone(),
            0,
            GroupConfig {
                initial_rebalance_delay: Duration::ZERO,
                ..GroupConfig::default()
            },
        ));
        leaders.sync(&a).await;
        coordinators.sync(&a).await;
        let (_publish, assigned) = tokio::sync::watch::channel(Some(a));
        let security = Arc::new(Security::new(vfs.clone(), SecurityConfig::default()));
        let api = Api::new(
            vfs,
            ApiConfig {
                broker_id: 0,
                incarnation: 1,
                advertised: "127.0.0.1:9092".into(),
                auto_create_topics: true,
                default_partitions: 1,
                broker_configs: Vec::new(),
                producer_id_block: 1000,
                inter_broker_listener: Arc::from("PLAINTEXT"),
                endpoints: Default::default(),
                log_dir: "/data".into(),
            },
            leaders,
            coordinators,
            assigned,
            security,
        );
        let mut session = Session::plaintext("127.0.0.1");
        for frame in super::chunks(data, 4) {
            let answered = tokio::time::timeout(ANSWER_WITHIN, async {
                match start(&api, &mut session, Bytes::copy_from_slice(frame)).await {
                    Ok(Started::Later(later)) => later.await.is_ok(),
                    Ok(Started::Now(_)) => true,
                    Err(_) => false,
                }
            })
            .await;
            if answered != Ok(true) {
                return;
            }
        }
    });
}

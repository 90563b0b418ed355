//! Broker configuration: command-line flags, each also a `KAAS_*` variable.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

#[derive(Clone, Debug, Parser)]
#[command(
    name = "kaas",
    version,
    about = "A Kafka-compatible broker that keeps every partition on one shared volume",
    long_about = "kaas serves the Kafka protocol and stores all partitions on a shared \
ReadWriteMany volume (NFSv4 or equivalent) instead of replicating them. Every broker of a \
cluster points --data-dir at the same volume and gets a distinct --broker-id."
)]
pub struct Config {
    /// Directory of the shared volume (an NFS mount in production; any local
    /// directory for a single broker on a laptop). It must exist and be writable.
    #[arg(long, env = "KAAS_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// Address the Kafka listener binds to.
    #[arg(long, env = "KAAS_LISTEN", default_value = "127.0.0.1:9092")]
    pub listen: SocketAddr,

    /// This broker's id, unique within the cluster (on Kubernetes: the pod ordinal).
    #[arg(long, env = "KAAS_BROKER_ID", default_value_t = 0)]
    pub broker_id: u32,

    /// host:port that clients are told to connect to; defaults to --listen.
    #[arg(long, env = "KAAS_ADVERTISED_LISTENER")]
    pub advertised_listener: Option<String>,

    /// Seconds between two heartbeats this broker writes to the volume.
    #[arg(long, env = "KAAS_HEARTBEAT_INTERVAL_SECS", default_value_t = 2)]
    pub heartbeat_interval_secs: u64,

    /// Seconds without a heartbeat after which a broker counts as gone and
    /// its partitions (or the controller role) move elsewhere.
    #[arg(long, env = "KAAS_SESSION_TIMEOUT_SECS", default_value_t = 10)]
    pub session_timeout_secs: u64,

    /// Create a topic when a client asks for metadata of an unknown one.
    #[arg(long, env = "KAAS_AUTO_CREATE_TOPICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_create_topics: bool,

    /// Partitions of topics created without a count (num.partitions).
    #[arg(long, env = "KAAS_NUM_PARTITIONS", default_value_t = 1)]
    pub num_partitions: u32,

    /// How long a new consumer group waits for more members before its
    /// first generation (group.initial.rebalance.delay.ms).
    #[arg(
        long,
        env = "KAAS_GROUP_INITIAL_REBALANCE_DELAY_MS",
        default_value_t = 3000
    )]
    pub group_initial_rebalance_delay_ms: u64,

    /// This broker's wall clock (the system clock in production; the
    /// simulator skews and jumps it).
    #[arg(skip)]
    pub wall_clock: crate::clock::WallClock,
}

impl Config {
    pub fn advertised(&self) -> String {
        self.advertised_listener
            .clone()
            .unwrap_or_else(|| self.listen.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_work_on_a_laptop() {
        let c = Config::try_parse_from(["kaas"]).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("./data"));
        assert_eq!(c.broker_id, 0);
        assert_eq!(c.advertised(), "127.0.0.1:9092");
    }

    #[test]
    fn flags_override_and_bad_values_are_clear() {
        let c = Config::try_parse_from([
            "kaas",
            "--broker-id",
            "3",
            "--listen",
            "0.0.0.0:9093",
            "--advertised-listener",
            "kaas-3.kaas:9093",
        ])
        .unwrap();
        assert_eq!(c.broker_id, 3);
        assert_eq!(c.advertised(), "kaas-3.kaas:9093");
        let err = Config::try_parse_from(["kaas", "--listen", "not-an-address"]).unwrap_err();
        assert!(err.to_string().contains("--listen"), "{err}");
    }

    #[test]
    fn help_explains_every_flag() {
        use clap::CommandFactory;
        let help = Config::command().render_long_help().to_string();
        for flag in [
            "--data-dir",
            "--listen",
            "--broker-id",
            "--advertised-listener",
        ] {
            assert!(help.contains(flag), "{flag} missing from --help");
        }
        assert!(help.contains("KAAS_DATA_DIR"), "env names shown in --help");
    }
}

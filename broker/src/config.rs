//! Broker configuration: command-line flags, each also a `KAAS_*` variable.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

use crate::security::listeners::{Listener, ListenerFlags, SecurityProtocol};

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
    /// (Also accepted after a subcommand: `kaas fsck --data-dir D`.)
    #[arg(long, env = "KAAS_DATA_DIR", default_value = "./data", global = true)]
    pub data_dir: PathBuf,

    /// Address the Kafka listener binds to.
    #[arg(long, env = "KAAS_LISTEN", default_value = "127.0.0.1:9092")]
    pub listen: SocketAddr,

    /// This broker's id, unique within the cluster: a number, or the name of
    /// a StatefulSet pod (`kaas-2`), whose ordinal is taken (on Kubernetes,
    /// set KAAS_BROKER_ID from the pod's metadata.name).
    #[arg(long, env = "KAAS_BROKER_ID", default_value = "0", value_parser = parse_broker_id)]
    pub broker_id: u32,

    /// The id of the cluster this broker belongs to. The first broker that
    /// starts on an empty volume records it there (a random one if unset);
    /// a broker whose id differs from the volume's refuses to start, so a
    /// broker pointed at another cluster's volume cannot join it.
    #[arg(long, env = "KAAS_CLUSTER_ID", value_parser = parse_cluster_id)]
    pub cluster_id: Option<String>,

    /// host:port that clients are told to connect to; defaults to --listen.
    #[arg(long, env = "KAAS_ADVERTISED_LISTENER")]
    pub advertised_listener: Option<String>,

    /// At start-up, connect to the advertised address and give up (exit)
    /// if that fails for this many seconds: clients would fail the same
    /// way. 0 skips the check (an address reachable only from outside, such
    /// as a NAT that does not hairpin).
    #[arg(long, env = "KAAS_ADVERTISED_CHECK_SECS", default_value_t = 30)]
    pub advertised_check_secs: u64,

    /// Address of a small HTTP server for probes: `/livez` answers 200 while
    /// the process runs, `/readyz` answers 200 once this broker is in the
    /// cluster's assignment and serves clients, 503 before and while it
    /// shuts down. Off unless set.
    #[arg(long, env = "KAAS_HEALTH_LISTEN")]
    pub health_listen: Option<SocketAddr>,

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

    /// The shortest and longest session timeout a JoinGroup may ask for
    /// (group.min.session.timeout.ms, group.max.session.timeout.ms).
    #[arg(
        long,
        env = "KAAS_GROUP_MIN_SESSION_TIMEOUT_MS",
        default_value_t = 6000
    )]
    pub group_min_session_timeout_ms: u64,
    #[arg(
        long,
        env = "KAAS_GROUP_MAX_SESSION_TIMEOUT_MS",
        default_value_t = 1_800_000
    )]
    pub group_max_session_timeout_ms: u64,

    /// Consumer-protocol groups (KIP-848): a member that sends no heartbeat
    /// for this long is fenced (group.consumer.session.timeout.ms) ...
    #[arg(
        long,
        env = "KAAS_GROUP_CONSUMER_SESSION_TIMEOUT_MS",
        default_value_t = 45_000,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub group_consumer_session_timeout_ms: u64,

    /// ... and members are asked to send one this often
    /// (group.consumer.heartbeat.interval.ms).
    #[arg(
        long,
        env = "KAAS_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS",
        default_value_t = 5000,
        value_parser = clap::value_parser!(u64).range(1..=i32::MAX as u64)
    )]
    pub group_consumer_heartbeat_interval_ms: u64,

    /// Producer ids one claim on the volume reserves for this broker (Kafka
    /// hands them out in blocks of 1000 too). Smaller blocks mean more
    /// claims; the simulator uses tiny ones so that brokers race for them.
    #[arg(long, env = "KAAS_PRODUCER_ID_BLOCK", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub producer_id_block: u32,

    /// Named listeners, `NAME://ip:port,...` (Kafka's `listeners`), for a
    /// broker with more than one: an internal PLAINTEXT one and an external
    /// SASL_SSL one, say. Unset: one PLAINTEXT listener on --listen.
    #[arg(long, env = "KAAS_LISTENERS")]
    pub listeners: Option<String>,

    /// What clients of each listener are told to connect to,
    /// `NAME://host:port,...`; a listener not named here advertises its
    /// bind address.
    #[arg(long, env = "KAAS_ADVERTISED_LISTENERS")]
    pub advertised_listeners: Option<String>,

    /// The security protocol of each listener, `NAME:PROTOCOL,...` with
    /// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; a listener named like a
    /// protocol needs no entry.
    #[arg(long, env = "KAAS_LISTENER_SECURITY_PROTOCOL_MAP")]
    pub listener_security_protocol_map: Option<String>,

    /// The listener brokers use to reach each other (transaction markers);
    /// it must be PLAINTEXT. Defaults to the first listener.
    #[arg(long, env = "KAAS_INTER_BROKER_LISTENER_NAME")]
    pub inter_broker_listener_name: Option<String>,

    /// PEM certificate chain of SSL and SASL_SSL listeners.
    #[arg(long, env = "KAAS_SSL_CERT_FILE")]
    pub ssl_cert_file: Option<PathBuf>,

    /// PEM private key of that certificate.
    #[arg(long, env = "KAAS_SSL_KEY_FILE")]
    pub ssl_key_file: Option<PathBuf>,

    /// PEM certificates of the CAs that sign client certificates.
    #[arg(long, env = "KAAS_SSL_CA_FILE")]
    pub ssl_ca_file: Option<PathBuf>,

    /// Client certificates on SSL listeners (ssl.client.auth): a verified
    /// certificate's subject is the connection's principal. SASL_SSL
    /// listeners ask for none: SASL names their principal (KIP-684).
    #[arg(long, env = "KAAS_SSL_CLIENT_AUTH", value_enum, default_value = "none")]
    pub ssl_client_auth: crate::security::tls_files::ClientAuth,

    /// The principal of a client certificate: its whole subject (`dn`,
    /// Kafka's default, `User:CN=app,O=org`) or its common name (`cn`).
    #[arg(long, env = "KAAS_SSL_PRINCIPAL", value_enum, default_value = "dn")]
    pub ssl_principal: crate::security::tls_files::PrincipalFrom,

    /// Seconds between two looks at the TLS files; changed files are
    /// loaded for new connections (a rotated Kubernetes Secret).
    #[arg(long, env = "KAAS_SSL_RELOAD_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub ssl_reload_secs: u64,

    /// SASL mechanisms offered on SASL listeners (sasl.enabled.mechanisms).
    #[arg(long, env = "KAAS_SASL_MECHANISMS", value_delimiter = ',',
          default_value = "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN", value_parser = parse_mechanism)]
    pub sasl_mechanisms: Vec<String>,

    /// Milliseconds an authenticated SASL session lasts before the client
    /// must re-authenticate (connections.max.reauth.ms, KIP-368); 0: forever.
    #[arg(long, env = "KAAS_SASL_SESSION_LIFETIME_MS", default_value_t = 0)]
    pub sasl_session_lifetime_ms: u64,

    /// `acl` enforces the ACLs kept on the volume on every request; `none`
    /// allows everything (Kafka without an authorizer).
    #[arg(long, env = "KAAS_AUTHORIZER", value_enum, default_value = "none")]
    pub authorizer: Authorizer,

    /// Principals allowed everything, `User:admin;User:ops` (super.users).
    #[arg(long, env = "KAAS_SUPER_USERS", value_delimiter = ';', value_parser = parse_principal)]
    pub super_users: Vec<crate::security::Principal>,

    /// Allow a request on a resource no ACL names
    /// (allow.everyone.if.no.acl.found).
    #[arg(long, env = "KAAS_ALLOW_EVERYONE_IF_NO_ACL_FOUND", default_value_t = false,
          action = clap::ArgAction::Set)]
    pub allow_everyone_if_no_acl_found: bool,

    /// Milliseconds between two looks for newer credentials and ACLs: the
    /// longest a change made through another broker takes to apply here.
    #[arg(long, env = "KAAS_SECURITY_REFRESH_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(10..))]
    pub security_refresh_ms: u64,

    /// Client connections this broker holds at most, over all listeners but
    /// the inter-broker one (max.connections); more are closed on accept.
    #[arg(long, env = "KAAS_MAX_CONNECTIONS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,

    /// Connections one client address holds at most (max.connections.per.ip).
    /// Clients behind one NAT share an address: raise it for them.
    #[arg(long, env = "KAAS_MAX_CONNECTIONS_PER_IP", default_value_t = 1_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections_per_ip: u64,

    /// Largest request accepted, in bytes (socket.request.max.bytes); a
    /// larger one closes its connection.
    #[arg(long, env = "KAAS_SOCKET_REQUEST_MAX_BYTES", default_value_t = 104_857_600,
          value_parser = clap::value_parser!(u64).range(1024..=2_147_483_647))]
    pub socket_request_max_bytes: u64,

    /// Bytes of requests one connection may have read and not yet answered
    /// (pipelined requests); beyond it the broker stops reading from that
    /// connection until answers go out. A single larger request is read alone.
    #[arg(long, env = "KAAS_MAX_IN_FLIGHT_BYTES_PER_CONNECTION", default_value_t = 104_857_600,
          value_parser = clap::value_parser!(u64).range(1024..=4_294_967_295))]
    pub max_in_flight_bytes_per_connection: u64,

    /// Most bytes a compaction pass's offset map takes
    /// (log.cleaner.dedupe.buffer.size): with 64 bytes a key, the default
    /// holds 2 million keys; a pass that fills it cleans up to there and
    /// the next one goes on.
    #[arg(long, env = "KAAS_LOG_CLEANER_DEDUPE_BUFFER_SIZE", default_value_t = 134_217_728,
          value_parser = clap::value_parser!(u64).range(65_536..))]
    pub log_cleaner_dedupe_buffer_size: u64,

    /// Bytes a compaction pass reads and writes per second, all partitions
    /// together (log.cleaner.io.max.bytes.per.second); 0: unthrottled.
    #[arg(
        long,
        env = "KAAS_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND",
        default_value_t = 0
    )]
    pub log_cleaner_io_max_bytes_per_second: u64,

    /// Time between compaction rounds over the partitions led here
    /// (log.cleaner.backoff.ms).
    #[arg(long, env = "KAAS_LOG_CLEANER_BACKOFF_MS", default_value_t = 15_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub log_cleaner_backoff_ms: u64,

    /// A connection with no request for this long is closed
    /// (connections.max.idle.ms); 0: never.
    #[arg(long, env = "KAAS_CONNECTIONS_MAX_IDLE_MS", default_value_t = 600_000)]
    pub connections_max_idle_ms: u64,

    /// Start even when the data directory's NFS mount has an option that
    /// breaks kaas's contract with the volume (soft, nocto, lookupcache=all,
    /// a version before 4.1): the check's refusal becomes a warning.
    #[arg(long, env = "KAAS_ALLOW_UNSAFE_MOUNT", default_value_t = false,
          action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub allow_unsafe_mount: bool,

    /// On NFS, open the volume's files with O_DIRECT, so that the client
    /// asks the server for no delegations: a power-lost host's delegations
    /// would stall the other brokers' heartbeats and takeovers for the
    /// server's lease (deploy/README.md, "Delegations"). `false` brings
    /// back buffered opens, for comparison.
    #[arg(long, env = "KAAS_NFS_DIRECT_IO", default_value_t = true,
          action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub nfs_direct_io: bool,

    /// Where the start-up mount check reads the mount table (tests point
    /// it at a prepared one).
    #[arg(
        long,
        env = "KAAS_MOUNTINFO",
        default_value = "/proc/self/mountinfo",
        hide = true
    )]
    pub mountinfo: PathBuf,

    /// Instead of running a broker: a tool that works on the volume.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// This broker's wall clock (the system clock in production; the
    /// simulator skews and jumps it).
    #[arg(skip)]
    pub wall_clock: crate::clock::WallClock,
}

/// One broker config as Kafka names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaConfig {
    pub name: String,
    pub value: String,
    /// Set by a flag or variable, not left at its default.
    pub explicit: bool,
}

#[derive(Clone, Debug, clap::Subcommand)]
pub enum Command {
    /// Writes a user's SCRAM credentials (SCRAM-SHA-256 and SCRAM-SHA-512)
    /// straight to the volume at --data-dir, no broker needed: the way in
    /// for the first admin of a cluster whose listeners all need SASL.
    /// Name that user in --super-users. Later users are best added with
    /// the admin API (kafka-configs --alter --add-config 'SCRAM-SHA-512=...').
    ScramUser(ScramUser),
    /// Reads the whole volume at --data-dir and reports damage (a
    /// manifest naming a lost segment, a segment shorter than its manifest
    /// vouches for, a batch failing its CRC with the first bad offset, an
    /// epoch without its claim, unreadable files), files
    /// nothing refers to, and cleanups pending (temps, staging, tombstones,
    /// .nfs files), naming each finding's topic. Read-only; safe while the
    /// cluster runs. Exit code 0: no errors or warnings; 1: some; 2: the
    /// volume cannot be read or is no kaas volume (no cluster id).
    Fsck(Fsck),
}

#[derive(Clone, Debug, clap::Args)]
pub struct Fsck {
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// First perform the repairs that are safe on a running cluster
    /// (removing the files of deleted topics), and say what was done; then
    /// check. Segments no manifest names are reported, not removed: the
    /// partition's next leader removes them.
    #[arg(long)]
    pub repair: bool,
    /// With --repair: give up the damaged records of partition
    /// TOPIC-PARTITION (for example orders-0; repeat for more), which kaas
    /// never does by itself. Each damaged segment is cut at its first bad
    /// batch and a segment that is gone is replaced by an empty one; the
    /// offsets given up are printed and never handed out again. The
    /// partition moves to a new leader epoch (producers see a leader
    /// change). See deploy/README.md, "When the one copy is damaged".
    #[arg(long, value_name = "TOPIC-PARTITION", requires = "repair", value_parser = parse_topic_partition)]
    pub truncate_damaged: Vec<String>,
    /// Skip reading back the records (every batch's CRC): check only the
    /// files and manifests, in seconds instead of the time it takes to
    /// read the whole volume.
    #[arg(long)]
    pub metadata_only: bool,
}

#[derive(Clone, Debug, clap::Args)]
pub struct ScramUser {
    /// The user name (its principal is `User:<name>`).
    #[arg(long)]
    pub user: String,
    /// A file holding the password (a mounted Secret); its trailing newline
    /// is not part of it. Or set KAAS_SCRAM_PASSWORD.
    #[arg(long, conflicts_with = "password")]
    pub password_file: Option<PathBuf>,
    #[arg(long, env = "KAAS_SCRAM_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// PBKDF2 iterations (4096 to 16384, as Kafka accepts).
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u32).range(4096..=16384))]
    pub iterations: u32,
}

fn parse_topic_partition(s: &str) -> Result<String, String> {
    crate::fsck::parse_partition(s).map(|_| s.to_owned())
}

/// Whether ACLs are enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Authorizer {
    None,
    Acl,
}

fn parse_mechanism(s: &str) -> Result<String, String> {
    let m = s.trim().to_ascii_uppercase();
    if crate::security::MECHANISMS.contains(&m.as_str()) {
        Ok(m)
    } else {
        Err(format!(
            "`{s}`: kaas offers {}",
            crate::security::MECHANISMS.join(", ")
        ))
    }
}

fn parse_principal(s: &str) -> Result<crate::security::Principal, String> {
    crate::security::Principal::parse(s.trim())
}

/// A broker id: a number, or a StatefulSet pod name ending in `-<ordinal>`.
fn parse_broker_id(s: &str) -> Result<u32, String> {
    let digits = s
        .rsplit_once('-')
        .map_or(s, |(name, n)| if name.is_empty() { s } else { n });
    digits.parse::<u32>().map_err(|_| {
        format!("`{s}` is neither a number nor a pod name ending in -<ordinal> (kaas-2)")
    })
}

/// Cluster ids are printable and short: letters, digits, `-`, `_`, `.`.
fn parse_cluster_id(s: &str) -> Result<String, String> {
    let ok = (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "`{s}`: a cluster id has 1 to 64 letters, digits, `-`, `_` or `.`"
        ))
    }
}

impl Config {
    /// This broker's settings under Kafka's broker config names, for
    /// DescribeConfigs: `(name, value, kaas flag or None)`. A value that
    /// differs from its flag's default counts as set by the operator.
    pub fn kafka_view(&self) -> Vec<KafkaConfig> {
        let cmd = <Self as clap::CommandFactory>::command();
        let default_of = |flag: &str| {
            cmd.get_arguments()
                .find(|a| a.get_id() == flag)
                .and_then(|a| a.get_default_values().first())
                .map(|v| v.to_string_lossy().into_owned())
        };
        let entry = |name: &str, value: String, flag: &str| KafkaConfig {
            name: name.to_owned(),
            explicit: default_of(flag).is_none_or(|d| d != value),
            value,
        };
        let listed = |f: &dyn Fn(&Listener) -> String| {
            self.resolved_listeners()
                .unwrap_or_default()
                .iter()
                .map(|l| format!("{}://{}", l.name, f(l)))
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut view = vec![
            entry("broker.id", self.broker_id.to_string(), "broker_id"),
            entry("node.id", self.broker_id.to_string(), "broker_id"),
            KafkaConfig {
                name: "listeners".into(),
                value: listed(&|l: &Listener| l.bind.to_string()),
                explicit: self.listeners.is_some() || self.listen.to_string() != "127.0.0.1:9092",
            },
            KafkaConfig {
                name: "advertised.listeners".into(),
                value: listed(&|l: &Listener| l.advertised.clone()),
                explicit: self.advertised_listener.is_some() || self.advertised_listeners.is_some(),
            },
            KafkaConfig {
                name: "listener.security.protocol.map".into(),
                value: self
                    .resolved_listeners()
                    .unwrap_or_default()
                    .iter()
                    .map(|l| format!("{}:{}", l.name, l.protocol))
                    .collect::<Vec<_>>()
                    .join(","),
                explicit: self.listener_security_protocol_map.is_some(),
            },
            KafkaConfig {
                name: "super.users".into(),
                value: self
                    .super_users
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(";"),
                explicit: !self.super_users.is_empty(),
            },
            entry("log.dirs", self.data_dir.display().to_string(), "data_dir"),
        ];
        view.extend(
            self.flag_view()
                .into_iter()
                .map(|(name, value, flag)| entry(name, value, flag)),
        );
        view
    }

    /// The settings that are one flag each: `(Kafka's name, value, flag)`;
    /// the flag's id is its field's name.
    fn flag_view(&self) -> Vec<(&'static str, String, &'static str)> {
        macro_rules! flags {
            ($c:ident; $($name:literal => $field:ident,)*) => {
                vec![$(($name, $c.$field.to_string(), stringify!($field))),*]
            };
        }
        flags!(self;
            "log.cleaner.dedupe.buffer.size" => log_cleaner_dedupe_buffer_size,
            "log.cleaner.io.max.bytes.per.second" => log_cleaner_io_max_bytes_per_second,
            "log.cleaner.backoff.ms" => log_cleaner_backoff_ms,
            "max.connections" => max_connections,
            "max.connections.per.ip" => max_connections_per_ip,
            "socket.request.max.bytes" => socket_request_max_bytes,
            "connections.max.idle.ms" => connections_max_idle_ms,
            "num.partitions" => num_partitions,
            "auto.create.topics.enable" => auto_create_topics,
            "group.initial.rebalance.delay.ms" => group_initial_rebalance_delay_ms,
            "group.min.session.timeout.ms" => group_min_session_timeout_ms,
            "group.max.session.timeout.ms" => group_max_session_timeout_ms,
            "group.consumer.session.timeout.ms" => group_consumer_session_timeout_ms,
            "group.consumer.heartbeat.interval.ms" => group_consumer_heartbeat_interval_ms,
        )
    }

    /// What each client connection is held to: the caps of
    /// `--max-connections`, `--max-connections-per-ip`,
    /// `--socket-request-max-bytes`, `--max-in-flight-bytes-per-connection`
    /// and `--connections-max-idle-ms`, logged as the broker starts.
    pub fn protocol(&self) -> crate::protocol::ProtocolConfig {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let config = crate::protocol::ProtocolConfig {
            max_frame_bytes: size(self.socket_request_max_bytes),
            max_in_flight_bytes: size(self.max_in_flight_bytes_per_connection),
            idle_timeout: (self.connections_max_idle_ms > 0)
                .then(|| std::time::Duration::from_millis(self.connections_max_idle_ms)),
            limits: crate::protocol::limits::ConnectionLimits::new(
                size(self.max_connections),
                size(self.max_connections_per_ip),
            ),
            ..Default::default()
        };
        tracing::info!(
            max_connections = self.max_connections,
            max_connections_per_ip = self.max_connections_per_ip,
            socket_request_max_bytes = self.socket_request_max_bytes,
            max_in_flight_requests_per_connection = config.max_in_flight,
            max_in_flight_bytes_per_connection = self.max_in_flight_bytes_per_connection,
            connections_max_idle_ms = self.connections_max_idle_ms,
            "connection limits"
        );
        config
    }

    /// The inter-broker listener's advertised address: what other brokers
    /// connect to, and what clients of a single-listener broker are told.
    pub fn advertised(&self) -> String {
        match self.resolved_listeners() {
            Ok(l) => self
                .inter_broker(&l)
                .map_or_else(|_| l[0].advertised.clone(), |i| i.advertised.clone()),
            Err(_) => self
                .advertised_listener
                .clone()
                .unwrap_or_else(|| self.listen.to_string()),
        }
    }

    fn resolved_listeners(&self) -> Result<Vec<Listener>, String> {
        crate::security::listeners::resolve(&ListenerFlags {
            listeners: self.listeners.as_deref(),
            advertised_listeners: self.advertised_listeners.as_deref(),
            protocol_map: self.listener_security_protocol_map.as_deref(),
            listen: self.listen,
            advertised_listener: self.advertised_listener.as_deref(),
        })
    }

    fn inter_broker<'a>(&self, listeners: &'a [Listener]) -> Result<&'a Listener, String> {
        match &self.inter_broker_listener_name {
            None => Ok(&listeners[0]),
            Some(name) => listeners
                .iter()
                .find(|l| l.name.eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    format!("--inter-broker-listener-name {name} is not one of --listeners")
                }),
        }
    }

    /// The listeners, checked: TLS ones have their files, the inter-broker
    /// one is PLAINTEXT (brokers do not authenticate to each other yet).
    pub fn listeners(&self) -> Result<Vec<Listener>, String> {
        let listeners = self.resolved_listeners()?;
        let inter = self.inter_broker(&listeners)?;
        if inter.protocol != SecurityProtocol::Plaintext {
            return Err(format!(
                "the inter-broker listener {} is {}: kaas brokers reach each other over \
                 PLAINTEXT only; add an internal PLAINTEXT listener (restricted to the \
                 brokers by a NetworkPolicy) and name it with --inter-broker-listener-name",
                inter.name, inter.protocol
            ));
        }
        if let Some(l) = listeners.iter().find(|l| l.protocol.tls()) {
            if cfg!(madsim) {
                return Err(format!(
                    "listener {} is {}: TLS is not simulated",
                    l.name, l.protocol
                ));
            }
            if self.ssl_cert_file.is_none() || self.ssl_key_file.is_none() {
                return Err(format!(
                    "listener {} is {} and needs --ssl-cert-file and --ssl-key-file",
                    l.name, l.protocol
                ));
            }
        }
        if listeners.iter().any(|l| l.protocol.sasl()) && self.sasl_mechanisms.is_empty() {
            return Err("SASL listeners need at least one --sasl-mechanisms".into());
        }
        Ok(listeners)
    }

    /// The TLS settings of a listener of `protocol`. `--ssl-client-auth`
    /// applies to SSL listeners only: a SASL_SSL client is authenticated
    /// by SASL and asked for no certificate (KIP-684).
    pub fn tls_files(
        &self,
        protocol: crate::security::SecurityProtocol,
    ) -> Option<crate::security::tls_files::TlsFiles> {
        use crate::security::SecurityProtocol;
        use crate::security::tls_files::ClientAuth;
        let client_auth = match protocol {
            SecurityProtocol::Ssl => self.ssl_client_auth,
            _ => ClientAuth::None,
        };
        Some(crate::security::tls_files::TlsFiles {
            cert: self.ssl_cert_file.clone()?,
            key: self.ssl_key_file.clone()?,
            ca: self.ssl_ca_file.clone(),
            client_auth,
            principal_from: self.ssl_principal,
        })
    }

    pub fn security(&self) -> crate::security::SecurityConfig {
        crate::security::SecurityConfig {
            sasl_mechanisms: self.sasl_mechanisms.clone(),
            session_lifetime: (self.sasl_session_lifetime_ms > 0)
                .then(|| std::time::Duration::from_millis(self.sasl_session_lifetime_ms)),
            authorizer: crate::security::AuthorizerConfig {
                enabled: self.authorizer == Authorizer::Acl,
                super_users: self.super_users.iter().cloned().collect(),
                allow_if_no_acl: self.allow_everyone_if_no_acl_found,
            },
            refresh: std::time::Duration::from_millis(self.security_refresh_ms),
        }
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
    fn a_pod_name_gives_its_ordinal_as_broker_id() {
        let id = |v: &str| {
            Config::try_parse_from(["kaas".to_owned(), format!("--broker-id={v}")])
                .map(|c| c.broker_id)
        };
        assert_eq!(id("7").unwrap(), 7);
        assert_eq!(id("kaas-2").unwrap(), 2);
        assert_eq!(id("my-kaas-cluster-12").unwrap(), 12);
        for bad in ["kaas", "kaas-", "-3", "kaas-x", "4294967296"] {
            let err = id(bad).unwrap_err().to_string();
            assert!(err.contains("--broker-id"), "{bad}: {err}");
        }
    }

    #[test]
    fn cluster_ids_are_checked() {
        let c = Config::try_parse_from(["kaas", "--cluster-id", "prod-eu.1"]).unwrap();
        assert_eq!(c.cluster_id.as_deref(), Some("prod-eu.1"));
        assert_eq!(Config::try_parse_from(["kaas"]).unwrap().cluster_id, None);
        for bad in ["", "a b", "x/y", &"x".repeat(65)] {
            assert!(
                Config::try_parse_from(["kaas", "--cluster-id", bad]).is_err(),
                "{bad:?}"
            );
        }
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
            "--cluster-id",
            "--advertised-check-secs",
            "--health-listen",
        ] {
            assert!(help.contains(flag), "{flag} missing from --help");
        }
        assert!(help.contains("KAAS_DATA_DIR"), "env names shown in --help");
    }
}

//! The wire protocol over real TCP on 127.0.0.1, with kafka-protocol as the client.
#![cfg(not(madsim))]
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::sync::Arc;

use broker::api::{Api, ApiConfig};
use broker::leaders::Leaders;
use broker::log::LogConfig;
use broker::protocol::frame::{read_frame, write_frame};
use broker::protocol::{ProtocolConfig, server};
use broker::security::{
    AuthorizerConfig, Credential, Mechanism, Principal, Security, SecurityConfig, SecurityProtocol,
};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterPartitionReassignmentsRequest, ApiKey, ApiVersionsRequest,
    ApiVersionsResponse, DescribeClientQuotasRequest, DescribeLogDirsRequest,
    DescribeQuorumRequest, DescribeQuorumResponse, ElectLeadersRequest,
    ListPartitionReassignmentsRequest, RequestHeader, ResponseHeader, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::messages::{
    CreateAclsRequest, DescribeAclsRequest, DescribeTopicPartitionsRequest, MetadataRequest,
    RequestKind, ResponseKind, SaslAuthenticateRequest, SaslAuthenticateResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes, encode_request_header_into_buffer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[path = "protocol/refusals.rs"]
mod refusals;

async fn start(config: ProtocolConfig) -> std::net::SocketAddr {
    start_secured(
        config,
        SecurityProtocol::Plaintext,
        SecurityConfig::default(),
    )
    .await
    .0
}

/// A broker on one listener of `protocol`, with its security state.
async fn start_secured(
    config: ProtocolConfig,
    protocol: SecurityProtocol,
    security: SecurityConfig,
) -> (std::net::SocketAddr, Arc<Security>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let vfs: Arc<dyn vfs::Vfs> = Arc::new(vfs::MemVfs::new());
    let leaders = Arc::new(Leaders::new(vfs.clone(), 0, LogConfig::default()));
    let (_publish, assignment) = tokio::sync::watch::channel(None);
    let vfs_for_groups = vfs.clone();
    vfs.mkdir(std::path::Path::new("security")).await.unwrap();
    let security = Arc::new(Security::new(vfs.clone(), security));
    let api = Api::new(
        vfs,
        ApiConfig {
            broker_id: 0,
            incarnation: 1,
            advertised: addr.to_string(),
            auto_create_topics: true,
            default_partitions: 1,
            broker_configs: Vec::new(),
            producer_id_block: 1000,
            inter_broker_listener: Arc::from("INTERNAL"),
            endpoints: Default::default(),
            log_dir: "/data".into(),
        },
        leaders,
        Arc::new(broker::groups::Coordinators::new(
            vfs_for_groups,
            0,
            broker::groups::GroupConfig::default(),
        )),
        assignment,
        security.clone(),
    );
    let info = server::ListenerInfo {
        name: Arc::from(protocol.to_string().as_str()),
        protocol,
        inter_broker: false,
        tls: None,
    };
    tokio::spawn(server::serve(listener, Arc::new(api), config, info));
    (addr, security)
}

fn api_versions_request(version: i16, correlation_id: i32) -> Bytes {
    let mut buf = BytesMut::new();
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("test")));
    encode_request_header_into_buffer(&mut buf, &header).unwrap();
    if (0..=4).contains(&version) {
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("kaas-test"))
            .with_client_software_version(StrBytes::from_static_str("1"))
            .encode(&mut buf, version)
            .unwrap();
    }
    buf.freeze()
}

fn decode_api_versions(mut frame: Bytes, version: i16) -> (i32, ApiVersionsResponse) {
    let header = ResponseHeader::decode(
        &mut frame,
        ApiKey::ApiVersions.response_header_version(version),
    )
    .unwrap();
    (
        header.correlation_id,
        ApiVersionsResponse::decode(&mut frame, version).unwrap(),
    )
}

#[tokio::test]
async fn api_versions_lists_what_the_broker_serves() {
    let addr = start(ProtocolConfig::default()).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    for version in 0..=4 {
        write_frame(
            &mut conn,
            &api_versions_request(version, 40 + i32::from(version)),
        )
        .await
        .unwrap();
        let frame = read_frame(&mut conn, 1 << 20).await.unwrap().unwrap();
        let (cid, response) = decode_api_versions(frame, version);
        assert_eq!(cid, 40 + i32::from(version));
        assert_eq!(response.error_code, 0);
        let own = response
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::ApiVersions as i16)
            .unwrap();
        assert_eq!((own.min_version, own.max_version), (0, 4));
        assert!(
            response.api_keys.len() >= 7,
            "produce, fetch, metadata, ..."
        );
    }
}

#[tokio::test]
async fn a_too_new_api_versions_gets_the_v0_fallback() {
    let addr = start(ProtocolConfig::default()).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    write_frame(&mut conn, &api_versions_request(77, 9))
        .await
        .unwrap();
    let frame = read_frame(&mut conn, 1 << 20).await.unwrap().unwrap();
    let (cid, response) = decode_api_versions(frame, 0);
    assert_eq!(cid, 9);
    assert_eq!(response.error_code, 35, "UNSUPPORTED_VERSION");
    assert!(!response.api_keys.is_empty(), "the ranges come along");
    // The connection stays usable for the retry.
    write_frame(&mut conn, &api_versions_request(3, 10))
        .await
        .unwrap();
    let frame = read_frame(&mut conn, 1 << 20).await.unwrap().unwrap();
    assert_eq!(decode_api_versions(frame, 3).0, 10);
}

#[tokio::test]
async fn an_unserved_api_is_refused_and_the_connection_stays_usable() {
    let addr = start(ProtocolConfig::default()).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let mut buf = BytesMut::new();
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::DescribeQuorum as i16)
        .with_request_api_version(2)
        .with_correlation_id(5)
        .with_client_id(Some(StrBytes::from_static_str("test")));
    encode_request_header_into_buffer(&mut buf, &header).unwrap();
    DescribeQuorumRequest::default()
        .encode(&mut buf, 2)
        .unwrap();
    write_frame(&mut conn, &buf).await.unwrap();
    let mut frame = read_frame(&mut conn, 1 << 20).await.unwrap().unwrap();
    let header = ResponseHeader::decode(
        &mut frame,
        ApiKey::DescribeQuorum.response_header_version(2),
    )
    .unwrap();
    assert_eq!(header.correlation_id, 5);
    let response = DescribeQuorumResponse::decode(&mut frame, 2).unwrap();
    assert_eq!(response.error_code, 35, "UNSUPPORTED_VERSION");
    write_frame(&mut conn, &api_versions_request(3, 6))
        .await
        .unwrap();
    let frame = read_frame(&mut conn, 1 << 20).await.unwrap().unwrap();
    assert_eq!(decode_api_versions(frame, 3).0, 6);
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let addr = start(ProtocolConfig {
        max_in_flight: 2,
        ..ProtocolConfig::default()
    })
    .await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let mut burst = Vec::new();
    for cid in 0..50 {
        write_frame(&mut burst, &api_versions_request(3, cid))
            .await
            .unwrap();
    }
    conn.write_all(&burst).await.unwrap();
    for cid in 0..50 {
        let frame = read_frame(&mut conn, 1 << 20).await.unwrap().unwrap();
        assert_eq!(decode_api_versions(frame, 3).0, cid);
    }
}

async fn assert_closed(conn: &mut TcpStream) {
    let end = read_frame(conn, 1 << 20).await;
    assert!(matches!(end, Ok(None) | Err(_)), "{end:?}");
}

#[tokio::test]
async fn bad_frames_close_only_their_connection() {
    let addr = start(ProtocolConfig {
        max_frame_bytes: 1024,
        ..ProtocolConfig::default()
    })
    .await;
    // Larger than allowed: refused from the length alone.
    let mut big = TcpStream::connect(addr).await.unwrap();
    big.write_all(&0x7fff_ffffu32.to_be_bytes()).await.unwrap();
    assert_closed(&mut big).await;
    // Too short to hold a request header.
    let mut short = TcpStream::connect(addr).await.unwrap();
    write_frame(&mut short, b"abc").await.unwrap();
    assert_closed(&mut short).await;
    // An API key Kafka does not have.
    let mut unknown = TcpStream::connect(addr).await.unwrap();
    write_frame(&mut unknown, &[0x27, 0x0f, 0, 0, 0, 0, 0, 1, 0xff, 0xff])
        .await
        .unwrap();
    assert_closed(&mut unknown).await;
    // A request header that stops half-way.
    let mut torn = TcpStream::connect(addr).await.unwrap();
    write_frame(&mut torn, &[0, 18, 0, 3, 0, 0, 0, 1, 0, 9, b'x'])
        .await
        .unwrap();
    assert_closed(&mut torn).await;
    // The server still serves everyone else.
    let mut fine = TcpStream::connect(addr).await.unwrap();
    write_frame(&mut fine, &api_versions_request(3, 1))
        .await
        .unwrap();
    assert!(read_frame(&mut fine, 1 << 20).await.unwrap().is_some());
}

/// Sends one request and reads its response; `None` if the broker closed
/// the connection instead.
async fn call(
    conn: &mut TcpStream,
    api: ApiKey,
    version: i16,
    request: RequestKind,
) -> Option<ResponseKind> {
    let mut buf = BytesMut::new();
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(9)
        .with_client_id(Some(StrBytes::from_static_str("test")));
    encode_request_header_into_buffer(&mut buf, &header).unwrap();
    request.encode(&mut buf, version).unwrap();
    write_frame(conn, &buf).await.ok()?;
    let mut frame = read_frame(conn, 1 << 20).await.ok()??;
    ResponseHeader::decode(&mut frame, api.response_header_version(version)).unwrap();
    Some(ResponseKind::decode(api, &mut frame, version).unwrap())
}

async fn sasl_step(conn: &mut TcpStream, bytes: Vec<u8>) -> Option<SaslAuthenticateResponse> {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
    match call(
        conn,
        ApiKey::SaslAuthenticate,
        2,
        RequestKind::SaslAuthenticate(request),
    )
    .await?
    {
        ResponseKind::SaslAuthenticate(r) => Some(r),
        other => panic!("{other:?}"),
    }
}

async fn handshake(conn: &mut TcpStream, mechanism: &'static str) -> SaslHandshakeResponse {
    let request =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
    match call(
        conn,
        ApiKey::SaslHandshake,
        1,
        RequestKind::SaslHandshake(request),
    )
    .await
    {
        Some(ResponseKind::SaslHandshake(r)) => r,
        other => panic!("{other:?}"),
    }
}

async fn plain(conn: &mut TcpStream, user: &str, password: &str) -> Option<i16> {
    assert_eq!(handshake(conn, "PLAIN").await.error_code, 0);
    let token = format!("\0{user}\0{password}").into_bytes();
    sasl_step(conn, token).await.map(|r| r.error_code)
}

fn with_user(security: &Security, user: &str, password: &str) -> impl Future<Output = ()> {
    let cred = |m| Credential::from_password(m, password, b"salt-of-the-test", 4096).unwrap();
    let (a, b) = (cred(Mechanism::Sha256), cred(Mechanism::Sha512));
    let user = user.to_owned();
    let done = security.change_credentials::<()>(move |c| {
        c.upsert(&user, Mechanism::Sha256, a.clone());
        c.upsert(&user, Mechanism::Sha512, b.clone());
        Ok(())
    });
    async move { done.await.unwrap() }
}

fn metadata() -> RequestKind {
    RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![])))
}

#[tokio::test]
async fn a_sasl_listener_serves_nothing_before_authentication() {
    let (addr, security) = start_secured(
        ProtocolConfig::default(),
        SecurityProtocol::SaslPlaintext,
        SecurityConfig::default(),
    )
    .await;
    with_user(&security, "alice", "pw").await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    // ApiVersions is fine, Metadata closes the connection.
    write_frame(&mut conn, &api_versions_request(3, 1))
        .await
        .unwrap();
    let frame = read_frame(&mut conn, 1 << 20).await.unwrap().unwrap();
    assert_eq!(decode_api_versions(frame, 3).0, 1);
    assert!(
        call(&mut conn, ApiKey::Metadata, 12, metadata())
            .await
            .is_none()
    );

    // A wrong password: SASL_AUTHENTICATION_FAILED, then the connection closes.
    let mut conn = TcpStream::connect(addr).await.unwrap();
    assert_eq!(plain(&mut conn, "alice", "nope").await, Some(58));
    assert!(
        call(&mut conn, ApiKey::Metadata, 12, metadata())
            .await
            .is_none()
    );
    // An unknown mechanism is refused with the ones offered.
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let r = handshake(&mut conn, "GSSAPI").await;
    assert_eq!(r.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    assert!(r.mechanisms.iter().any(|m| m.as_str() == "SCRAM-SHA-512"));
    // The right one: served.
    let mut conn = TcpStream::connect(addr).await.unwrap();
    assert_eq!(plain(&mut conn, "alice", "pw").await, Some(0));
    assert!(
        call(&mut conn, ApiKey::Metadata, 12, metadata())
            .await
            .is_some()
    );
    // SaslHandshake v0: the token goes as a bare frame, the answer comes as one.
    let v0 = || {
        let r = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
        RequestKind::SaslHandshake(r)
    };
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let Some(ResponseKind::SaslHandshake(r)) =
        call(&mut conn, ApiKey::SaslHandshake, 0, v0()).await
    else {
        panic!("no handshake answer");
    };
    assert_eq!(r.error_code, 0);
    write_frame(&mut conn, b"\0alice\0pw").await.unwrap();
    let answer = read_frame(&mut conn, 1 << 20).await.unwrap().unwrap();
    assert!(answer.is_empty(), "PLAIN has nothing to say back");
    assert!(
        call(&mut conn, ApiKey::Metadata, 12, metadata())
            .await
            .is_some()
    );
    // ... and a wrong bare token closes the connection.
    let mut conn = TcpStream::connect(addr).await.unwrap();
    call(&mut conn, ApiKey::SaslHandshake, 0, v0())
        .await
        .unwrap();
    write_frame(&mut conn, b"\0alice\0no").await.unwrap();
    assert!(
        read_frame(&mut conn, 1 << 20)
            .await
            .ok()
            .flatten()
            .is_none()
    );
}

#[tokio::test]
async fn scram_sha_512_and_256_authenticate_against_the_stored_credentials() {
    use scram_rs::scram_sync::SyncScramClient;
    use scram_rs::{ScramNonce, ScramResultClient, ScramSha256RustNative, ScramSha512RustNative};

    #[derive(Debug)]
    struct Client(&'static str, &'static str);
    impl scram_rs::ScramAuthClient for &Client {
        fn get_username(&self) -> &str {
            self.0
        }
        fn get_password(&self) -> &str {
            self.1
        }
    }
    impl scram_rs::ScramCbHelper for &Client {}

    async fn login<S: scram_rs::ScramHashing>(
        addr: std::net::SocketAddr,
        mechanism: &'static str,
        who: &Client,
    ) -> i16 {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        assert_eq!(handshake(&mut conn, mechanism).await.error_code, 0);
        let mut client = SyncScramClient::<S, &Client, &Client>::new(
            who,
            ScramNonce::none().unwrap(),
            scram_rs::ChannelBindType::None,
            who,
            false,
        )
        .unwrap();
        let mut out = match client.init_client() {
            ScramResultClient::Output(o) => o,
            ScramResultClient::Completed => panic!("completed before starting"),
        };
        loop {
            let Some(r) = sasl_step(&mut conn, out.into_bytes()).await else {
                return -1;
            };
            if r.error_code != 0 {
                return r.error_code;
            }
            let server = String::from_utf8(r.auth_bytes.to_vec()).unwrap();
            out = match client.parse_response(&server) {
                Ok(ScramResultClient::Output(o)) => o,
                Ok(ScramResultClient::Completed) => {
                    // Proved, and the server's signature checked out: served.
                    assert!(
                        call(&mut conn, ApiKey::Metadata, 12, metadata())
                            .await
                            .is_some()
                    );
                    return 0;
                }
                Err(e) => panic!("the client refused the server: {e}"),
            };
        }
    }

    let (addr, security) = start_secured(
        ProtocolConfig::default(),
        SecurityProtocol::SaslPlaintext,
        SecurityConfig::default(),
    )
    .await;
    with_user(&security, "bob", "hunter2").await;
    let good = Client("bob", "hunter2");
    assert_eq!(
        login::<ScramSha512RustNative>(addr, "SCRAM-SHA-512", &good).await,
        0
    );
    assert_eq!(
        login::<ScramSha256RustNative>(addr, "SCRAM-SHA-256", &good).await,
        0
    );
    let bad = Client("bob", "hunter3");
    assert_eq!(
        login::<ScramSha512RustNative>(addr, "SCRAM-SHA-512", &bad).await,
        58
    );
    let nobody = Client("mallory", "hunter2");
    assert_eq!(
        login::<ScramSha512RustNative>(addr, "SCRAM-SHA-512", &nobody).await,
        58
    );
}

/// A secured listener where `admin` is a super user and `carol` has no ACL
/// yet: their logged-in connections, and the broker's security.
async fn acl_stage() -> (TcpStream, TcpStream, Arc<Security>) {
    let config = SecurityConfig {
        authorizer: AuthorizerConfig {
            enabled: true,
            super_users: [Principal::user("admin")].into(),
            allow_if_no_acl: false,
        },
        ..SecurityConfig::default()
    };
    let (addr, security) = start_secured(
        ProtocolConfig::default(),
        SecurityProtocol::SaslPlaintext,
        config,
    )
    .await;
    with_user(&security, "admin", "a").await;
    with_user(&security, "carol", "c").await;
    let mut carol = TcpStream::connect(addr).await.unwrap();
    assert_eq!(plain(&mut carol, "carol", "c").await, Some(0));
    let mut admin = TcpStream::connect(addr).await.unwrap();
    assert_eq!(plain(&mut admin, "admin", "a").await, Some(0));
    (carol, admin, security)
}

/// ALLOW User:carol DESCRIBE on the cluster.
fn allow_carol_describe() -> kafka_protocol::messages::create_acls_request::AclCreation {
    kafka_protocol::messages::create_acls_request::AclCreation::default()
        .with_resource_type(4) // CLUSTER
        .with_resource_name(StrBytes::from_static_str("kafka-cluster"))
        .with_resource_pattern_type(3) // LITERAL
        .with_principal(StrBytes::from_static_str("User:carol"))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(8) // DESCRIBE
        .with_permission_type(3) // ALLOW
}

/// DescribeAcls of every ACL.
fn describe_every_acl() -> RequestKind {
    RequestKind::DescribeAcls(
        DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(1),
    )
}

#[tokio::test]
async fn a_principal_without_acls_may_not_change_see_or_use_the_clusters_admin_apis() {
    let (mut carol, _admin, _security) = acl_stage().await;
    let create = |c| RequestKind::CreateAcls(CreateAclsRequest::default().with_creations(vec![c]));
    let allow_describe = allow_carol_describe();
    let describe = describe_every_acl();
    // Carol may neither change ACLs nor see them.
    let Some(ResponseKind::CreateAcls(r)) = call(
        &mut carol,
        ApiKey::CreateAcls,
        3,
        create(allow_describe.clone()),
    )
    .await
    else {
        panic!()
    };
    assert_eq!(r.results[0].error_code, 31, "CLUSTER_AUTHORIZATION_FAILED");
    let Some(ResponseKind::DescribeAcls(r)) =
        call(&mut carol, ApiKey::DescribeAcls, 3, describe.clone()).await
    else {
        panic!()
    };
    assert_eq!(r.error_code, 31);
    let log_dirs = RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default());
    let Some(ResponseKind::DescribeLogDirs(r)) =
        call(&mut carol, ApiKey::DescribeLogDirs, 4, log_dirs.clone()).await
    else {
        panic!()
    };
    assert_eq!((r.error_code, r.results.len()), (31, 0), "nor the volume");
    // Before v3 the response has no error field: Kafka's answer is an
    // empty list (once an encoding error that closed the connection).
    let Some(ResponseKind::DescribeLogDirs(r)) =
        call(&mut carol, ApiKey::DescribeLogDirs, 1, log_dirs.clone()).await
    else {
        panic!()
    };
    assert_eq!((r.error_code, r.results.len()), (0, 0));
    // Nor move partitions, elect leaders or list the moves.
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    let orders = || TopicName(StrBytes::from_static_str("orders"));
    let reassign = RequestKind::AlterPartitionReassignments(
        AlterPartitionReassignmentsRequest::default().with_topics(vec![
            ReassignableTopic::default()
                .with_name(orders())
                .with_partitions(vec![
                    ReassignablePartition::default()
                        .with_replicas(Some(vec![kafka_protocol::messages::BrokerId(0)])),
                ]),
        ]),
    );
    let Some(ResponseKind::AlterPartitionReassignments(r)) =
        call(&mut carol, ApiKey::AlterPartitionReassignments, 0, reassign).await
    else {
        panic!()
    };
    assert_eq!(r.error_code, 31);
    let elect = RequestKind::ElectLeaders(ElectLeadersRequest::default().with_topic_partitions(
        Some(vec![TopicPartitions::default().with_topic(orders()).with_partitions(vec![0])]),
    ));
    let Some(ResponseKind::ElectLeaders(r)) =
        call(&mut carol, ApiKey::ElectLeaders, 0, elect).await
    else {
        panic!()
    };
    assert_eq!(
        r.replica_election_results[0].partition_result[0].error_code,
        31
    );
    let list =
        RequestKind::ListPartitionReassignments(ListPartitionReassignmentsRequest::default());
    let Some(ResponseKind::ListPartitionReassignments(r)) = call(
        &mut carol,
        ApiKey::ListPartitionReassignments,
        0,
        list.clone(),
    )
    .await
    else {
        panic!()
    };
    assert_eq!(r.error_code, 31);
    // Client quotas: DESCRIBE_CONFIGS and ALTER_CONFIGS on the cluster.
    let quotas = RequestKind::DescribeClientQuotas(DescribeClientQuotasRequest::default());
    let Some(ResponseKind::DescribeClientQuotas(r)) =
        call(&mut carol, ApiKey::DescribeClientQuotas, 1, quotas).await
    else {
        panic!()
    };
    assert_eq!(r.error_code, 31);
    let alter =
        RequestKind::AlterClientQuotas(AlterClientQuotasRequest::default().with_entries(vec![
            kafka_protocol::messages::alter_client_quotas_request::EntryData::default()
                .with_entity(vec![
                    kafka_protocol::messages::alter_client_quotas_request::EntityData::default()
                        .with_entity_type(StrBytes::from_static_str("client-id")),
                ]),
        ]));
    let Some(ResponseKind::AlterClientQuotas(r)) =
        call(&mut carol, ApiKey::AlterClientQuotas, 1, alter).await
    else {
        panic!()
    };
    assert_eq!(r.entries[0].error_code, 31);
    assert_eq!(
        r.entries[0].entity[0].entity_type.as_str(),
        "client-id",
        "the entity is named back"
    );
}

#[tokio::test]
async fn an_admins_acl_lets_a_principal_describe_the_cluster_and_nothing_more() {
    let (mut carol, mut admin, security) = acl_stage().await;
    let allow_describe = allow_carol_describe();
    let describe = describe_every_acl();
    let log_dirs = RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default());
    let list =
        RequestKind::ListPartitionReassignments(ListPartitionReassignmentsRequest::default());
    // The admin grants her DESCRIBE on the cluster; a bad ACL is refused alone.
    let bad = allow_describe
        .clone()
        .with_resource_name(StrBytes::from_static_str("other"));
    let request = RequestKind::CreateAcls(
        CreateAclsRequest::default().with_creations(vec![allow_describe.clone(), bad]),
    );
    let Some(ResponseKind::CreateAcls(r)) = call(&mut admin, ApiKey::CreateAcls, 3, request).await
    else {
        panic!()
    };
    let codes: Vec<i16> = r.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [0, 42], "the cluster resource is kafka-cluster");
    let Some(ResponseKind::DescribeAcls(r)) =
        call(&mut carol, ApiKey::DescribeAcls, 3, describe.clone()).await
    else {
        panic!()
    };
    assert_eq!(r.error_code, 0);
    assert_eq!(r.resources.len(), 1);
    assert_eq!(r.resources[0].acls[0].principal.as_str(), "User:carol");
    let Some(ResponseKind::DescribeLogDirs(r)) =
        call(&mut carol, ApiKey::DescribeLogDirs, 4, log_dirs).await
    else {
        panic!()
    };
    assert_eq!(r.error_code, 0);
    assert_eq!(r.results[0].log_dir.as_str(), "/data");
    let Some(ResponseKind::ListPartitionReassignments(r)) =
        call(&mut carol, ApiKey::ListPartitionReassignments, 0, list).await
    else {
        panic!()
    };
    assert_eq!(
        (r.error_code, r.topics.len()),
        (0, 0),
        "DESCRIBE lists the moves"
    );
    // DESCRIBE on the cluster is not DESCRIBE on a topic.
    use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
    let topics = RequestKind::DescribeTopicPartitions(
        DescribeTopicPartitionsRequest::default().with_topics(vec![
            TopicRequest::default().with_name(TopicName(StrBytes::from_static_str("orders"))),
        ]),
    );
    let Some(ResponseKind::DescribeTopicPartitions(r)) =
        call(&mut carol, ApiKey::DescribeTopicPartitions, 0, topics).await
    else {
        panic!()
    };
    assert_eq!(r.topics.len(), 1);
    assert_eq!(r.topics[0].error_code, 29, "TOPIC_AUTHORIZATION_FAILED");
    // The ACL is version 1 of the document on the volume.
    assert_eq!(security.acls().0, 1);
}

/// A connection from `source` (any 127/8 address reaches the listener).
async fn connect_from(addr: std::net::SocketAddr, source: [u8; 4]) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::from((source, 0)))
        .unwrap();
    socket.connect(addr).await.unwrap()
}

async fn answers(conn: &mut TcpStream) -> bool {
    if write_frame(conn, &api_versions_request(3, 1))
        .await
        .is_err()
    {
        return false;
    }
    matches!(read_frame(conn, 1 << 20).await, Ok(Some(_)))
}

#[tokio::test]
async fn connections_over_a_cap_are_closed_and_places_come_back() {
    let limits = broker::protocol::limits::ConnectionLimits::new(3, 2);
    let addr = start(ProtocolConfig {
        limits: limits.clone(),
        ..ProtocolConfig::default()
    })
    .await;
    let mut a1 = connect_from(addr, [127, 0, 0, 1]).await;
    let mut a2 = connect_from(addr, [127, 0, 0, 1]).await;
    assert!(answers(&mut a1).await && answers(&mut a2).await);
    // A third from the same address: over --max-connections-per-ip.
    let mut a3 = connect_from(addr, [127, 0, 0, 1]).await;
    assert!(
        !answers(&mut a3).await,
        "a third connection from one address"
    );
    // Another address gets in, up to the broker's total of three.
    let mut b1 = connect_from(addr, [127, 0, 0, 2]).await;
    assert!(answers(&mut b1).await);
    let mut c1 = connect_from(addr, [127, 0, 0, 3]).await;
    assert!(!answers(&mut c1).await, "a fourth connection to the broker");
    // A closed connection gives its place back.
    drop(a1);
    for _ in 0..100 {
        if limits.held() < 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let mut c2 = connect_from(addr, [127, 0, 0, 3]).await;
    assert!(
        answers(&mut c2).await,
        "a place freed by a closed connection"
    );
    assert!(answers(&mut a2).await && answers(&mut b1).await);
}

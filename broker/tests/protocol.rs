//! The wire protocol over real TCP on 127.0.0.1, with kafka-protocol as the client.
#![cfg(not(madsim))]
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::sync::Arc;

use broker::api::{Api, ApiConfig};
use broker::leaders::Leaders;
use broker::log::LogConfig;
use broker::protocol::frame::{read_frame, write_frame};
use broker::protocol::{ProtocolConfig, server};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes, encode_request_header_into_buffer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

async fn start(config: ProtocolConfig) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let vfs: Arc<dyn vfs::Vfs> = Arc::new(vfs::MemVfs::new());
    let leaders = Arc::new(Leaders::new(vfs.clone(), 0, LogConfig::default()));
    let (_publish, assignment) = tokio::sync::watch::channel(None);
    let vfs_for_groups = vfs.clone();
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
        },
        leaders,
        Arc::new(broker::groups::Coordinators::new(
            vfs_for_groups,
            0,
            broker::groups::GroupConfig::default(),
        )),
        assignment,
    );
    tokio::spawn(server::serve(listener, Arc::new(api), config));
    addr
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
        .with_request_api_key(ApiKey::SaslHandshake as i16)
        .with_request_api_version(1)
        .with_correlation_id(5)
        .with_client_id(Some(StrBytes::from_static_str("test")));
    encode_request_header_into_buffer(&mut buf, &header).unwrap();
    SaslHandshakeRequest::default().encode(&mut buf, 1).unwrap();
    write_frame(&mut conn, &buf).await.unwrap();
    let mut frame = read_frame(&mut conn, 1 << 20).await.unwrap().unwrap();
    let header =
        ResponseHeader::decode(&mut frame, ApiKey::SaslHandshake.response_header_version(1))
            .unwrap();
    assert_eq!(header.correlation_id, 5);
    let response = SaslHandshakeResponse::decode(&mut frame, 1).unwrap();
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

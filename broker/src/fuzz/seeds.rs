//! The seed inputs of each fuzz target, made from the code: real requests
//! of every API and version, batches the broker builds, the files it
//! writes. `cargo test` replays them (`corpus.rs`); `ci/fuzz/run` writes
//! them into the corpus it grows outside the repository
//! (`cargo test -p broker --lib fuzz::seeds -- --ignored`), so a format
//! change reaches the fuzzers with no file to regenerate.
#![allow(clippy::unwrap_used)]
// The fuzz corpus on this machine, not the volume.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;

use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{StrBytes, encode_request_header_into_buffer};

use crate::log::batch;
use crate::protocol::unsupported::tests::default_request;
use crate::protocol::versions;

/// One seed: the target it feeds, a name that says what it is, its bytes.
pub(super) struct Seed {
    pub target: &'static str,
    pub name: String,
    pub data: Vec<u8>,
}

#[derive(Default)]
struct Seeds(Vec<Seed>);

impl Seeds {
    fn put(&mut self, target: &'static str, name: &str, data: &[u8]) {
        self.0.push(Seed {
            target,
            name: name.to_string(),
            data: data.to_vec(),
        });
    }
}

/// Every target's seeds.
pub(super) fn all() -> Vec<Seed> {
    let mut s = Seeds::default();
    request_frames(&mut s);
    record_sets(&mut s);
    metadata_files(&mut s);
    partition_files(&mut s);
    sasl_exchanges(&mut s);
    s.0
}

fn request_frames(s: &mut Seeds) {
    for api in ApiKey::iter() {
        let (Some(request), Some((min, max))) = (default_request(api), versions::supported(api))
        else {
            continue;
        };
        for version in min..=max {
            let header = RequestHeader::default()
                .with_request_api_key(api as i16)
                .with_request_api_version(version)
                .with_correlation_id(7)
                .with_client_id(Some(StrBytes::from_static_str("fuzz")));
            let mut buf = BytesMut::new();
            if encode_request_header_into_buffer(&mut buf, &header).is_err()
                || request.encode(&mut buf, version).is_err()
            {
                continue;
            }
            s.put("request_frame", &format!("{api:?}-v{version}"), &buf);
            let mut alone = vec![0u8];
            alone.extend_from_slice(&buf);
            s.put("request_answer", &format!("{api:?}-v{version}"), &alone);
        }
    }
}

fn record_sets(s: &mut Seeds) {
    let plain = batch::build((-1, -1, -1), 1000, &[b"a", b"bb", b""]);
    let idempotent = batch::build((7, 1, 5), 1000, &[b"v1", b"v2"]);
    let txn = batch::build_transactional((8, 0, 0), 1000, &[b"t"]);
    let marker = batch::build_marker((8, 0), batch::Marker::Commit, 3, 1001);
    let timed = batch::build_timed((-1, -1, -1), &[(5, b"x"), (3, b"y"), (9, b"z")]);
    let mut all = plain.to_vec();
    for b in [&idempotent, &txn, &marker, &timed] {
        all.extend_from_slice(b);
    }
    for (name, set) in [
        ("plain", plain.to_vec()),
        ("idempotent", idempotent.to_vec()),
        ("transactional", txn.to_vec()),
        ("marker", marker.to_vec()),
        ("timed", timed.to_vec()),
        ("all", all.clone()),
    ] {
        let mut input = vec![1u8];
        input.extend_from_slice(&set);
        s.put("record_set", name, &input);
        let mut produce = vec![8u8, 0];
        produce.extend_from_slice(&set);
        s.put("partition_files", &format!("produce-{name}"), &produce);
    }
}

fn metadata_files(s: &mut Seeds) {
    use crate::cluster::assignment::Assignment;
    use crate::groups::store::GroupRecord;
    use crate::security::{AclSet, Credentials};
    use crate::txn_store::record::TxnRecord;
    let json = |v: serde_json::Value| serde_json::to_vec(&v).unwrap();
    let payloads: Vec<(u8, &str, Vec<u8>)> = vec![
        (
            0,
            "topic-meta",
            json(serde_json::json!({"id": "t-0123", "name": "t", "partitions": 3})),
        ),
        (
            1,
            "manifest",
            json(
                serde_json::json!({"epoch": 5, "segments": [{"base_offset": 0, "epoch": 1, "end_offset": 10, "bytes": 100}], "log_start_offset": 0}),
            ),
        ),
        (
            2,
            "heartbeat",
            json(
                serde_json::json!({"broker_id": 7, "incarnation": 1, "sequence": 2, "advertised": "h:9092"}),
            ),
        ),
        (3, "cluster-id", b"0123456789abcdef".to_vec()),
        (
            4,
            "assignment",
            serde_json::to_vec(&Assignment::default()).unwrap(),
        ),
        (
            5,
            "group",
            serde_json::to_vec(&GroupRecord {
                group_id: "g".into(),
                ..GroupRecord::default()
            })
            .unwrap(),
        ),
        (
            6,
            "transaction",
            serde_json::to_vec(&TxnRecord::new("tx", 5, 60_000, 1)).unwrap(),
        ),
        (
            7,
            "topic-config",
            json(serde_json::json!({"retention.ms": "1000", "cleanup.policy": "delete"})),
        ),
        (
            8,
            "credentials",
            serde_json::to_vec(&Credentials::default()).unwrap(),
        ),
        (9, "acls", serde_json::to_vec(&AclSet::default()).unwrap()),
        (10, "controller", b"3".to_vec()),
        (11, "name-claim", b"t-0123".to_vec()),
        (12, "producer-block", b"1".to_vec()),
        (
            13,
            "preferred-leaders",
            json(serde_json::json!({"topics": {"t-0123": {"0": 2, "1": 0}}})),
        ),
        (14, "client-quotas", {
            use crate::quota::{ClientQuotas, Entity, Kind, Name};
            let mut q = ClientQuotas::default();
            let app = Entity {
                user: Some(Name::Named("alice".into())),
                client_id: Some(Name::Default),
            };
            q.set(&app, Kind::Produce, Some(1 << 20));
            q.set(&Entity::default(), Kind::Fetch, Some(1000));
            serde_json::to_vec(&q).unwrap()
        }),
    ];
    for (which, name, payload) in payloads {
        let mut sealed = vec![which | 0x80];
        sealed.extend_from_slice(&payload);
        s.put("metadata_file", &format!("sealed-{name}"), &sealed);
        let mut raw = vec![which];
        raw.extend_from_slice(&payload);
        s.put("metadata_file", &format!("raw-{name}"), &raw);
    }
}

fn partition_files(s: &mut Seeds) {
    for (name, bytes) in super::partition::base_files() {
        let case: u8 = if name.ends_with(".log") {
            1
        } else if name.ends_with(".timeindex") {
            4
        } else if name.ends_with(".index") {
            3
        } else if name.starts_with(crate::layout::MANIFEST_PREFIX) {
            5
        } else if name.starts_with(crate::layout::EPOCH_PREFIX) {
            7
        } else {
            continue;
        };
        let mut input = vec![case];
        input.extend_from_slice(&bytes);
        s.put("partition_files", &format!("whole-{name}"), &input);
        if case == 5 {
            if let Some(payload) = payload_of(&bytes) {
                let mut sealed = vec![6u8];
                sealed.extend_from_slice(payload);
                s.put("partition_files", &format!("sealed-{name}"), &sealed);
                let mut meta = vec![0x81u8];
                meta.extend_from_slice(payload);
                s.put("metadata_file", &format!("sealed-{name}"), &meta);
            }
        }
        if case == 1 {
            let mut tail = vec![2u8];
            tail.extend_from_slice(&bytes[..bytes.len().min(100)]);
            s.put("partition_files", &format!("extend-{name}"), &tail);
        }
    }
    for case in 1u8..8 {
        s.put("partition_files", &format!("case-{case}-empty"), &[case]);
        let mut torn = vec![case];
        torn.extend_from_slice(&batch::build((-1, -1, -1), 7, &[b"torn"])[..40]);
        s.put("partition_files", &format!("case-{case}-torn"), &torn);
    }
}

/// The payload of an envelope: after magic, version, kind and length,
/// before the CRC.
fn payload_of(bytes: &[u8]) -> Option<&[u8]> {
    let kind_len = usize::from(*bytes.get(5)?);
    bytes.get(6 + kind_len + 4..bytes.len().checked_sub(4)?)
}

fn sasl_exchanges(s: &mut Seeds) {
    s.put(
        "sasl_exchange",
        "plain",
        b"\x02\x00\x00fuzz\x00fuzz-password",
    );
    s.put(
        "sasl_exchange",
        "plain-v0",
        b"\x06\x00\x00fuzz\x00fuzz-password",
    );
    for (flags, name) in [
        (0u8, "sha256"),
        (1, "sha512"),
        (4, "sha256-v0"),
        (5, "sha512-v0"),
    ] {
        let mut input = vec![flags, 18];
        input.extend_from_slice(b"n,,n=fuzz,r=abcdef");
        input.push(0);
        input.extend_from_slice(b"c=biws,r=abcdefXYZ,p=dGhpcyBpcyBub3QgYSBwcm9vZg==");
        s.put("sasl_exchange", name, &input);
    }
}

/// Where `ci/fuzz/run` grows each target's corpus: `KAAS_FUZZ_CORPUS`,
/// or `target/fuzz-corpus` of the workspace.
fn corpus_root() -> PathBuf {
    std::env::var_os("KAAS_FUZZ_CORPUS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-corpus"),
        PathBuf::from,
    )
}

#[test]
#[ignore = "writes the seeds into the corpus outside the repository; ci/fuzz/run calls it"]
fn write_seeds() {
    let root = corpus_root();
    for seed in all() {
        let dir = root.join(seed.target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("seed-{}", seed.name)), &seed.data).unwrap();
    }
}

//! Replays each target's seeds (`seeds.rs`, made from the code) and its
//! regressions (`fuzz/regressions/<target>`: inputs that once crashed,
//! hung or allocated without bound, committed with the fix) through its
//! entry point, so that every `cargo test` keeps them fixed and the entry
//! points stay in step with the code. The corpus the fuzzers grow lives
//! outside the repository (`ci/fuzz/run`).
// The repository's regression files, not the volume.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;

fn replay(target: &str, entry: fn(&[u8])) {
    let seeds: Vec<_> = super::seeds::all()
        .into_iter()
        .filter(|s| s.target == target)
        .collect();
    assert!(!seeds.is_empty(), "{target} has no seeds");
    for seed in &seeds {
        entry(&seed.data);
    }
    for input in regressions(target) {
        let data = std::fs::read(&input)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", input.display()));
        entry(&data);
    }
}

/// The committed regressions of `target`, in name order (none is fine).
fn regressions(target: &str) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut inputs: Vec<PathBuf> = entries
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    inputs.sort();
    inputs
}

#[test]
fn every_regression_belongs_to_a_target() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions");
    let targets = [
        "request_frame",
        "record_set",
        "metadata_file",
        "partition_files",
        "sasl_exchange",
        "request_answer",
    ];
    for entry in std::fs::read_dir(&root).unwrap_or_else(|e| panic!("no {}: {e}", root.display())) {
        let path = entry
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
            .path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        assert!(
            !path.is_dir() || targets.contains(&name),
            "{} is not a fuzz target's folder: its inputs would never be replayed",
            path.display()
        );
    }
}

#[test]
fn request_frame() {
    replay("request_frame", super::request_frame);
}

#[test]
fn record_set() {
    replay("record_set", super::record_set);
}

#[test]
fn metadata_file() {
    replay("metadata_file", super::metadata_file);
}

#[test]
fn partition_files() {
    replay("partition_files", super::partition_files);
}

#[test]
fn sasl_exchange() {
    replay("sasl_exchange", super::sasl_exchange);
}

#[test]
fn request_answer() {
    replay("request_answer", super::request_answer);
}

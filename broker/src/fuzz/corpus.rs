//! Replays every input of the committed corpus (`fuzz/corpus/<target>`)
//! through its entry point, so that what a fuzzer once found stays fixed
//! in every `cargo test`, and the entry points stay in step with the code.
// The repository's corpus files, not the volume.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;

fn replay(target: &str, entry: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("no corpus at {}: {e}", dir.display()))
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    inputs.sort();
    assert!(!inputs.is_empty(), "the corpus of {target} is empty");
    for input in inputs {
        let data = std::fs::read(&input)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", input.display()));
        entry(&data);
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

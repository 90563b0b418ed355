//! Entry points of the fuzz targets in `fuzz/` (cargo-fuzz, libFuzzer).
//! Each takes arbitrary bytes and hands them to the code that reads bytes
//! kaas does not control: request frames from clients, record batches
//! inside produce requests, SASL tokens, and every file on the volume (a
//! torn write, a foreign file or a bit flip must be an error, never a
//! panic). None may panic, hang or allocate without bound on any input.
//!
//! The unit tests replay every target's seeds and the regressions in
//! `fuzz/regressions`, so a plain `cargo test` keeps every input that
//! once broke a decoder working.

mod answer;
mod batches;
mod metadata;
mod partition;
mod request;
mod sasl;

pub use answer::request_answer;
pub use batches::record_set;
pub use metadata::metadata_file;
pub use partition::partition_files;
pub use request::request_frame;
pub use sasl::sasl_exchange;

use std::cell::RefCell;

thread_local! {
    static RUNTIME: RefCell<Option<tokio::runtime::Runtime>> = const { RefCell::new(None) };
}

/// Runs `f` to completion on this thread's current-thread runtime, made
/// once: a runtime per input would cost more than most inputs.
fn block_on<F: Future>(f: F) -> F::Output {
    RUNTIME.with(|r| {
        let mut r = r.borrow_mut();
        let rt = r.get_or_insert_with(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap_or_else(|e| panic!("cannot build a runtime for the fuzz harness: {e}"))
        });
        rt.block_on(f)
    })
}

/// Splits `data` into up to `max` chunks, each preceded by its length in
/// one byte (0 = the rest): how a target takes several inputs from one.
fn chunks(mut data: &[u8], max: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while !data.is_empty() && out.len() < max {
        let len = usize::from(data[0]);
        data = &data[1..];
        let take = if len == 0 {
            data.len()
        } else {
            len.min(data.len())
        };
        out.push(&data[..take]);
        data = &data[take..];
    }
    out
}

#[cfg(test)]
mod corpus;
#[cfg(test)]
mod seeds;

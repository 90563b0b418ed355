//! Physical bounds that benchmarks compare kaas against, measured with
//! plain POSIX calls on the same directory in the same run.

// A benchmark's yardstick: the raw disk and the real clock, never the volume
// of a simulated broker.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::Write;
use std::path::Path;
use std::time::Instant;

/// MB/s of sequential `chunk`-byte writes, each followed by fdatasync, into
/// a fresh file in `dir` until `total` bytes. The data comes from distinct
/// buffers, as requests do: rewriting one cache-hot buffer would measure
/// the CPU cache rather than the path to the disk.
pub fn raw_fsync_bandwidth(dir: &Path, total: usize, chunk: usize) -> std::io::Result<f64> {
    let path = dir.join(".raw-fsync-bound");
    let mut f = std::fs::File::create(&path)?;
    let chunks: Vec<Vec<u8>> = (0..total / chunk).map(|i| vec![i as u8; chunk]).collect();
    let start = Instant::now();
    for c in &chunks {
        f.write_all(c)?;
        f.sync_data()?;
    }
    let secs = start.elapsed().as_secs_f64();
    drop(f);
    std::fs::remove_file(&path)?;
    Ok((chunks.len() * chunk) as f64 / (1 << 20) as f64 / secs)
}

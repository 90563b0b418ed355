//! Operations per second of the model NFS on one host, with caching on and
//! faults off, next to the plain in-memory volume measured in the same run.
//!
//! `cargo bench -p vfs --bench model_ops`

#[cfg(not(madsim))]
mod real {
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Instant as WallClock;

    use bytes::Bytes;
    use vfs::model::{ModelNfs, NfsConfig};
    use vfs::{MemVfs, OpenOptions, Vfs};

    const FILES: usize = 64;
    const ROUNDS: usize = 40_000;

    /// One round is open, read 4 KiB, write 512 B, read it back, stat, close:
    /// six operations, the mix a broker's log and metadata paths produce.
    async fn mix(vfs: &dyn Vfs, paths: &[PathBuf]) -> u64 {
        let chunk = Bytes::from(vec![7u8; 512]);
        let mut ops = 0;
        for round in 0..ROUNDS {
            let path = &paths[round % FILES];
            let f = vfs.open(path, OpenOptions::write()).await.expect("open");
            let at = ((round / FILES) % 16) as u64 * 512;
            f.read_at(0, 4096).await.expect("read");
            f.write_at(at, chunk.clone()).await.expect("write");
            f.read_at(at, 512).await.expect("read back");
            f.stat().await.expect("stat");
            f.close().await.expect("close");
            ops += 6;
        }
        ops
    }

    async fn measure(name: &str, vfs: Arc<dyn Vfs>) -> f64 {
        let paths: Vec<PathBuf> = (0..FILES).map(|i| PathBuf::from(format!("f{i}"))).collect();
        for p in &paths {
            let f = vfs
                .open(p, OpenOptions::create_new())
                .await
                .expect("create");
            f.write_at(0, Bytes::from(vec![1u8; 8192]))
                .await
                .expect("fill");
            f.close().await.expect("close");
        }
        mix(vfs.as_ref(), &paths).await; // warm-up
        let start = WallClock::now();
        let ops = mix(vfs.as_ref(), &paths).await;
        let rate = ops as f64 / start.elapsed().as_secs_f64();
        println!("{name:<28} {rate:>12.0} ops/s");
        rate
    }

    pub fn run() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        rt.block_on(async {
            println!("single-threaded open/read/write/read/stat/close mix, {ROUNDS} rounds");
            let baseline = measure("MemVfs (local semantics)", Arc::new(MemVfs::new())).await;
            let nfs = ModelNfs::new(NfsConfig::default(), 1);
            let model = measure("model NFS, one host", Arc::new(nfs.host(0))).await;
            println!("model / MemVfs: {:.2}", model / baseline);
            println!(
                "target: >= 1000000 ops/s for the model: {}",
                if model >= 1_000_000.0 {
                    "met"
                } else {
                    "NOT met"
                }
            );
        });
    }
}

fn main() {
    #[cfg(not(madsim))]
    real::run();
    #[cfg(madsim)]
    eprintln!("model_ops measures wall-clock speed: run it in the production build");
}

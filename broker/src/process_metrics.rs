//! The `process_*` metrics every Prometheus exporter has (CPU seconds,
//! memory, open and allowed file descriptors, threads, start time), read
//! from `/proc/self` at each scrape, so dashboards and alerts written for
//! any exporter work unchanged. Linux only, and not in the simulator: the
//! numbers are the host's, not simulated ones.

// /proc/self is the kernel's view of this process, not the volume.
#![allow(clippy::disallowed_methods)]

use std::sync::Mutex;

use procfs_core::process::{LimitValue, Limits, Stat};
use procfs_core::{ExplicitSystemInfo, FromRead, FromReadSI, KernelStats};
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Counter, Gauge, IntGauge, Opts};

pub struct ProcessCollector {
    cpu: Counter,
    open_fds: IntGauge,
    max_fds: IntGauge,
    virtual_memory: IntGauge,
    resident_memory: IntGauge,
    start_time: Gauge,
    threads: IntGauge,
    descs: Vec<Desc>,
    /// One scrape at a time moves the CPU counter.
    scraping: Mutex<()>,
}

impl ProcessCollector {
    pub fn new() -> Self {
        let int = |name: &str, help: &str| {
            IntGauge::with_opts(Opts::new(name, help)).expect("valid gauge")
        };
        let cpu = Counter::with_opts(Opts::new(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds",
        ))
        .expect("valid counter");
        let start_time = Gauge::with_opts(Opts::new(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
        ))
        .expect("valid gauge");
        let mut c = Self {
            cpu,
            open_fds: int("process_open_fds", "Number of open file descriptors"),
            max_fds: int("process_max_fds", "Maximum number of open file descriptors"),
            virtual_memory: int(
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
            ),
            resident_memory: int(
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
            ),
            start_time,
            threads: int("process_threads", "Number of OS threads in the process"),
            descs: Vec::new(),
            scraping: Mutex::new(()),
        };
        c.descs = [
            c.cpu.desc(),
            c.open_fds.desc(),
            c.max_fds.desc(),
            c.virtual_memory.desc(),
            c.resident_memory.desc(),
            c.start_time.desc(),
            c.threads.desc(),
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
        c
    }

    /// Reads `/proc/self` into the metrics; `None` where it cannot.
    fn update(&self) -> Option<()> {
        let ticks = rustix::param::clock_ticks_per_second().max(1);
        let page = rustix::param::page_size() as u64;
        let stat = Stat::from_read(std::fs::read("/proc/self/stat").ok()?.as_slice()).ok()?;
        let cpu = (stat.utime + stat.stime) as f64 / ticks as f64;
        let delta = cpu - self.cpu.get();
        if delta > 0.0 {
            self.cpu.inc_by(delta);
        }
        self.virtual_memory.set(stat.vsize as i64);
        self.resident_memory.set((stat.rss * page) as i64);
        self.threads.set(stat.num_threads);
        let info = ExplicitSystemInfo {
            boot_time_secs: 0,
            ticks_per_second: ticks,
            page_size: page,
            is_little_endian: cfg!(target_endian = "little"),
        };
        if let Some(kernel) = std::fs::read("/proc/stat")
            .ok()
            .and_then(|b| KernelStats::from_read(b.as_slice(), &info).ok())
        {
            self.start_time
                .set(kernel.btime as f64 + stat.starttime as f64 / ticks as f64);
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(fds.count() as i64);
        }
        if let Some(limits) = std::fs::read("/proc/self/limits")
            .ok()
            .and_then(|b| Limits::from_read(b.as_slice()).ok())
        {
            if let LimitValue::Value(n) = limits.max_open_files.soft_limit {
                self.max_fds.set(n as i64);
            }
        }
        Some(())
    }
}

impl Default for ProcessCollector {
    fn default() -> Self {
        Self::new()
    }
}

impl Collector for ProcessCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let _one = self.scraping.lock().unwrap_or_else(|p| p.into_inner());
        if self.update().is_none() {
            return Vec::new();
        }
        [
            self.cpu.collect(),
            self.open_fds.collect(),
            self.max_fds.collect(),
            self.virtual_memory.collect(),
            self.resident_memory.collect(),
            self.start_time.collect(),
            self.threads.collect(),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let c = ProcessCollector::new();
        let families = c.collect();
        let names: Vec<&str> = families.iter().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "process_cpu_seconds_total",
                "process_open_fds",
                "process_max_fds",
                "process_virtual_memory_bytes",
                "process_resident_memory_bytes",
                "process_start_time_seconds",
                "process_threads",
            ]
        );
        assert!(c.open_fds.get() > 0);
        assert!(c.max_fds.get() >= c.open_fds.get());
        assert!(c.resident_memory.get() > 0);
        assert!(c.threads.get() >= 1);
        // Started after 2020 (the boot time was read and added).
        assert!(c.start_time.get() > 1.5e9, "{}", c.start_time.get());
    }
}

//! `sim`: the deterministic simulator. `cargo run -p sim -- --seed 7`.

#[cfg(not(madsim))]
fn main() {
    sim::relaunch::into_simulation_build();
}

#[cfg(madsim)]
fn main() -> std::process::ExitCode {
    sim::cli::main()
}

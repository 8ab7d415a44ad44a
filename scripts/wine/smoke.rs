// Built and run by scripts/setup.sh through scripts/wine-run.sh: proves that a
// Rust program for x86_64-pc-windows-gnu loads under wine (std imports
// ProcessPrng from bcryptprimitives.dll, provided by processprng.c) and that
// the runner propagates output and exit status.
use std::collections::HashMap;

fn main() {
    // RandomState seeds its keys from ProcessPrng.
    let mut m = HashMap::new();
    m.insert("ok", 1);
    println!("csi-proxy wine smoke test: {}", m.keys().next().unwrap());
}

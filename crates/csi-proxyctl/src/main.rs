//! `csi-proxyctl`: look at a running csi-proxy and run one storage call by
//! hand. See `csi-proxyctl --help`; the logic is in the library.

use std::process::ExitCode;

fn main() -> ExitCode {
    let code = csi_proxyctl::run(
        std::env::args_os(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    ExitCode::from(code)
}

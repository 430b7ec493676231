//! `stampede report`: the HTML report of an output folder.

use std::path::PathBuf;

use clap::Args;
use stampede_scenario::Result;

#[derive(Args)]
pub(super) struct ReportArgs {
    /// An output folder written by `stampede run` or `verify` (e.g. out/baltor).
    pub(super) dir: PathBuf,
}

pub(super) fn report(args: ReportArgs) -> Result<()> {
    let path = stampede_report::write(&args.dir)?;
    println!("{}", path.display());
    Ok(())
}

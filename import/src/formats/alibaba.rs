//! Alibaba's microservices trace, `MSCallGraph` CSV: a row per call between an
//! upstream microservice (`um`) and a downstream one (`dm`, its `interface`), in a
//! trace (`traceid`), at a place in the call tree (`rpcid`: `0.1.1` is a call made by
//! the invocation of `0.1`), with a response time (`rt`, milliseconds) and a start
//! (`timestamp`, milliseconds). Both published layouts are read by their header:
//! v2021 (`traceid,timestamp,rpcid,um,rpctype,interface,dm,rt`, often behind an
//! unnamed index column) and v2022 (`timestamp,traceid,service,rpc_id,rpctype,um,
//! uminstanceid,interface,dm,dminstanceid,rt`).
//!
//! The quirks: a remote call is recorded twice with one rpcid, by its caller and by
//! its callee, the two response times of opposite signs — both rows are one call, its
//! time the larger |rt| (see `Model::add_trace`'s merge of one id); rpcids repeated by
//! asynchronous threads that lost their context are different calls (numbered apart;
//! their own calls stay under the first); `mc` and `db` calls are the stateful
//! services' invocations, leaves; a callee named `UNKNOWN` (or not at all) is no call
//! the model can make: the row is skipped and counted. Each row becomes a server span
//! of `dm.interface` whose parent is its rpcid's parent (`0` is `0.1`'s: v2022 writes
//! the user's call to the entry service as rpcid `0`).

use super::Reader;
use crate::span::{Kind, Span, NO_NAME};

/// Returned for the header line (not a record).
pub const HEADER: &str = "the header";

/// Where each field is in a row, from the header.
#[derive(Clone, Copy, Debug)]
pub struct Columns {
    trace: usize,
    timestamp: usize,
    rpcid: usize,
    dm: usize,
    interface: usize,
    rt: usize,
    dm_instance: Option<usize>,
}

fn header(line: &str) -> Result<Columns, String> {
    let names: Vec<String> = line.split(',').map(|n| n.trim().trim_matches('"').to_ascii_lowercase()).collect();
    let find = |wanted: &[&str]| names.iter().position(|n| wanted.contains(&n.as_str()));
    let need = |wanted: &[&str]| find(wanted).ok_or_else(|| format!("the header has no {} column", wanted[0]));
    // The caller's column is not read (a row's parent is its rpcid's), but a file
    // without one is not this format.
    need(&["um"])?;
    Ok(Columns {
        trace: need(&["traceid"])?,
        timestamp: need(&["timestamp"])?,
        rpcid: need(&["rpcid", "rpc_id"])?,
        dm: need(&["dm"])?,
        interface: need(&["interface"])?,
        rt: need(&["rt"])?,
        dm_instance: find(&["dminstanceid"]),
    })
}

/// A stable 64-bit hash (FNV-1a) of an id's text: trace ids are hex in one release and
/// opaque strings in another, and an rpcid is a dotted path.
fn hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Reads one line: the header (kept in `columns`) or a row.
pub fn read_line(line: &[u8], columns: &mut Option<Columns>, reader: &mut Reader) -> Result<(), String> {
    let line = std::str::from_utf8(line).map_err(|_| "not UTF-8".to_string())?.trim_end();
    // A spreadsheet's export starts with a byte-order mark.
    let line = line.strip_prefix('\u{feff}').unwrap_or(line);
    let Some(at) = *columns else {
        *columns = Some(header(line)?);
        return Err(HEADER.to_string());
    };
    // A quoted field (`"0.1"`, as spreadsheets and pandas write them) is its text.
    let fields: Vec<&str> = line.split(',').map(|f| f.trim().trim_matches('"')).collect();
    let field =
        |i: usize| fields.get(i).copied().ok_or_else(|| format!("{} fields, the header names more", fields.len()));
    let (trace, rpcid) = (field(at.trace)?, field(at.rpcid)?);
    if trace.is_empty() || rpcid.is_empty() {
        reader.skipped().no_id += 1;
        return Ok(());
    }
    let number = |i: usize, what: &str| -> Result<f64, String> {
        let text = field(i)?;
        text.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| format!("{what} {text:?} is not a number"))
    };
    let (timestamp, rt) = (number(at.timestamp, "timestamp")?, number(at.rt, "rt")?);
    let (dm, interface) = (field(at.dm)?, field(at.interface)?);
    if dm.is_empty() || dm == "UNKNOWN" || dm == "(?)" {
        // A callee the trace does not name: not a call to the caller itself.
        reader.skipped().unknown_callee += 1;
        return Ok(());
    }
    // `0` (v2022's USER → entry row) is the parent of `0.1`, `0.2`…; where no `0` row
    // exists (v2021), `0.1` is the trace's root.
    let parent = rpcid.rsplit_once('.').map(|(parent, _)| hash(parent));
    let instance = at.dm_instance.and_then(|i| fields.get(i)).filter(|i| !i.is_empty() && **i != "UNAVAILABLE");
    let start = (timestamp * 1e6) as i64;
    let span = Span {
        trace: u128::from(hash(trace)),
        id: hash(rpcid),
        parent,
        service: reader.names.intern(dm),
        instance: instance.map_or(NO_NAME, |i| reader.names.intern(i)),
        name: reader.names.intern(if interface.is_empty() { "call" } else { interface }),
        peer: NO_NAME,
        kind: Kind::Server,
        start,
        end: start.saturating_add((rt.abs() * 1e6) as i64),
        error: false,
        attempt: None,
    };
    reader.push(span);
    Ok(())
}

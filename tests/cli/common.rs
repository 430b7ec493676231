//! Helpers shared by the integration tests: run the `stampede` binary and inspect
//! what it wrote.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `stampede` with `args` and returns its output.
pub fn stampede(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stampede")).args(args).output().expect("the stampede binary runs")
}

/// Standard error as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Standard output as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Every file below `dir`, relative, sorted.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, found);
            } else {
                found.push(path.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, dir, &mut found);
    found.sort();
    found
}

/// Every Parquet file below `dir` as (relative path, bytes), sorted: what runs that
/// must agree byte for byte are compared on.
pub fn parquet_tables(dir: &Path) -> Vec<(String, Vec<u8>)> {
    files_below(dir)
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "parquet"))
        .map(|f| (f.display().to_string(), std::fs::read(dir.join(&f)).unwrap()))
        .collect()
}

/// Python with duckdb, pyarrow and pandas, or why not. CI sets
/// `STAMPEDE_REQUIRE_PYTHON=1`, which turns a missing package into a failure.
pub fn python_with_duckdb() -> Result<String, String> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = std::process::Command::new(&python).args(["-c", "import duckdb, pyarrow, pandas"]).output();
    match probe {
        Ok(output) if output.status.success() => Ok(python),
        Ok(_) => Err(format!("{python} lacks duckdb, pyarrow or pandas: python3 -m pip install duckdb pyarrow pandas")),
        Err(e) => Err(format!("cannot start {python} ({e}): install Python 3 with duckdb, pyarrow and pandas")),
    }
}

/// Says loudly that a test was skipped and what to install — written to the
/// terminal directly, past the test harness's output capture, so a skip never reads
/// as a silent pass. Panics instead when `STAMPEDE_REQUIRE_PYTHON=1` (CI).
pub fn skip(test: &str, why: &str) {
    skip_unless_required(test, why, "STAMPEDE_REQUIRE_PYTHON");
}

/// [`skip`] for a test that needs a browser: panics when `STAMPEDE_REQUIRE_BROWSER=1` (CI).
pub fn skip_browser(test: &str, why: &str) {
    skip_unless_required(test, why, "STAMPEDE_REQUIRE_BROWSER");
}

pub fn skip_unless_required(test: &str, why: &str, variable: &str) {
    if std::env::var(variable).is_ok_and(|v| v == "1") {
        panic!("{test}: {why} ({variable}=1 makes this a failure)");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// Debian's Chromium (or `$CHROMIUM`), or why not.
pub fn chromium() -> Result<String, String> {
    let candidates = match std::env::var("CHROMIUM") {
        Ok(path) => vec![path],
        Err(_) => vec!["chromium".to_string(), "chromium-browser".to_string()],
    };
    for candidate in &candidates {
        if let Ok(output) = Command::new(candidate).arg("--version").output() {
            if output.status.success() {
                return Ok(candidate.clone());
            }
        }
    }
    Err(format!(
        "no headless browser ({} not found): install Debian's chromium package (apt-get install chromium) or set CHROMIUM",
        candidates.join(", ")
    ))
}

/// One HTTP/1.1 request to a local server: (status, body). The body is read by its
/// Content-Length or chunks (Chromium's DevTools server keeps connections open).
pub fn http(method: &str, url: &str, body: Option<&str>) -> (u16, String) {
    use std::io::{BufRead, Read, Write};
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let mut stream = std::net::TcpStream::connect(host).expect("the server accepts");
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    let body = body.unwrap_or("");
    let content_type = if body.is_empty() { "" } else { "Content-Type: application/json\r\n" };
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{content_type}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reader = std::io::BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status: u16 = line.split_whitespace().nth(1).expect("a status line").parse().unwrap();
    let (mut length, mut chunked) = (None, false);
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let header = line.trim_end().to_ascii_lowercase();
        if header.is_empty() {
            break;
        }
        if let Some(value) = header.strip_prefix("content-length:") {
            length = value.trim().parse::<usize>().ok();
        }
        if header.starts_with("transfer-encoding:") && header.contains("chunked") {
            chunked = true;
        }
    }
    let mut bytes = Vec::new();
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            let size = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
            if size == 0 {
                break;
            }
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).unwrap();
            bytes.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = length {
        bytes.resize(length, 0);
        reader.read_exact(&mut bytes).unwrap();
    } else {
        reader.read_to_end(&mut bytes).unwrap();
    }
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// A running `stampede serve`, stopped when dropped.
pub struct Server {
    pub child: std::process::Child,
    pub url: String,
}

impl Server {
    /// Starts `stampede serve --port 0` with `args` and waits for its address.
    pub fn start(args: &[&str]) -> Server {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["serve", "--port", "0"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("stampede serve starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let start = line.find("http://").unwrap_or_else(|| panic!("no address in {line:?}"));
        let url = line[start..].split_whitespace().next().unwrap().trim_end_matches('/').to_string();
        Server { child, url }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The README and the book's pages (`docs/src/SUMMARY.md`, in its order), as one
/// text: what a reader reads front to back, and what the README tests run and check.
pub fn book() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut text = std::fs::read_to_string(root.join("README.md")).unwrap();
    for page in book_pages() {
        text.push('\n');
        text.push_str(&std::fs::read_to_string(root.join("docs/src").join(page)).unwrap());
    }
    text
}

/// The pages `docs/src/SUMMARY.md` links, in its order (paths under `docs/src`).
pub fn book_pages() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let summary = std::fs::read_to_string(root.join("docs/src/SUMMARY.md")).unwrap();
    summary
        .lines()
        .filter_map(|line| line.split("](").nth(1).and_then(|rest| rest.split(')').next()))
        .map(str::to_string)
        .collect()
}

//! A minimal Chrome DevTools Protocol client for the browser tests: starts Debian's
//! headless Chromium with a debugging port, attaches to its page over a WebSocket,
//! evaluates JavaScript, collects console errors and uncaught exceptions (and every
//! console message and log entry, for the report's check that a page says nothing) and
//! takes screenshots.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

use crate::common::http;

pub struct Browser {
    child: Child,
    socket: WebSocket<TcpStream>,
    next_id: u64,
    /// Console errors and uncaught exceptions seen so far.
    pub errors: Vec<String>,
    /// Every console message, uncaught exception and log entry (a blocked request, a
    /// Content-Security-Policy violation) since the last [`Browser::take_messages`].
    messages: Vec<String>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `chromium` headless and attaches to its first page.
    pub fn start(chromium: &str) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                "--window-size=1280,1600",
                "--remote-debugging-port=0",
                "--remote-allow-origins=*",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        let mut port = None;
        for line in BufReader::new(child.stderr.take().unwrap()).lines() {
            let line = line.unwrap();
            if let Some(at) = line.find("ws://127.0.0.1:") {
                let rest = &line[at + "ws://127.0.0.1:".len()..];
                port = rest.split('/').next().map(str::to_string);
                break;
            }
        }
        let port = port.expect("Chromium says where DevTools listens");
        let mut page = None;
        for _ in 0..50 {
            let (_, body) = http("GET", &format!("http://127.0.0.1:{port}/json/list"), None);
            let targets: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            page = targets.as_array().and_then(|t| {
                t.iter()
                    .find(|t| t["type"] == "page")
                    .and_then(|t| t["webSocketDebuggerUrl"].as_str().map(str::to_string))
            });
            if page.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let url = page.expect("a page target");
        let stream = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        let (socket, _) = tungstenite::client(url.as_str(), stream).expect("a DevTools WebSocket");
        let mut browser =
            Browser { child, socket, next_id: 0, errors: Vec::new(), messages: Vec::new(), _profile: profile };
        browser.send("Runtime.enable", json!({}));
        browser.send("Page.enable", json!({}));
        browser.send("Log.enable", json!({}));
        browser
    }

    /// Sends a command and returns its result, noting errors from events meanwhile.
    pub fn send(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.socket.send(Message::text(json!({"id": id, "method": method, "params": params}).to_string())).unwrap();
        loop {
            let message = self.socket.read().expect("DevTools answers");
            let Message::Text(text) = message else { continue };
            let value: Value = serde_json::from_str(text.as_str()).unwrap();
            let params = &value["params"];
            match value["method"].as_str() {
                Some("Runtime.exceptionThrown") => {
                    let exception = format!("exception: {}", params["exceptionDetails"]);
                    self.messages.push(exception.clone());
                    self.errors.push(exception);
                }
                Some("Runtime.consoleAPICalled") => {
                    let message = format!("console.{}: {}", params["type"].as_str().unwrap_or("?"), params["args"]);
                    if params["type"] == "error" {
                        self.errors.push(message.clone());
                    }
                    self.messages.push(message);
                }
                Some("Log.entryAdded") => {
                    let entry = &params["entry"];
                    self.messages.push(format!("{} {}: {}", entry["source"], entry["level"], entry["text"]));
                }
                _ => {}
            }
            if value["id"] == id {
                if let Some(error) = value.get("error") {
                    panic!("{method}: {error}");
                }
                return value["result"].clone();
            }
        }
    }

    /// Evaluates `expression` (awaiting a promise) and returns its value.
    pub fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .send("Runtime.evaluate", json!({"expression": expression, "awaitPromise": true, "returnByValue": true}));
        if let Some(exception) = result.get("exceptionDetails") {
            panic!("{expression}: {exception}");
        }
        result["result"]["value"].clone()
    }

    /// Waits (up to 15 s) until `condition` is true in the page.
    pub fn wait_for(&mut self, condition: &str) {
        self.eval(&format!(
            "new Promise((resolve, reject) => {{ const t0 = Date.now(); (function poll() {{ \
             let ok = false; try {{ ok = ({condition}); }} catch (e) {{}} \
             if (ok) resolve(true); else if (Date.now() - t0 > 15000) reject(new Error('timed out waiting for: ' + {:?})); \
             else setTimeout(poll, 40); }})(); }})",
            condition
        ));
    }

    pub fn navigate(&mut self, url: &str) {
        self.send("Page.navigate", json!({"url": url}));
    }

    /// Lays the page out `width` CSS pixels wide (at one device pixel per CSS pixel).
    pub fn set_width(&mut self, width: u32) {
        self.set_viewport(width, 1000);
    }

    /// A viewport of `width` × `height` CSS pixels, one device pixel each.
    pub fn set_viewport(&mut self, width: u32, height: u32) {
        self.send(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
    }

    /// The console messages, exceptions and log entries since the last call.
    pub fn take_messages(&mut self) -> Vec<String> {
        std::mem::take(&mut self.messages)
    }

    /// The viewport as a PNG file's bytes.
    pub fn screenshot(&mut self) -> Vec<u8> {
        use base64::Engine as _;
        let shot = self.send("Page.captureScreenshot", json!({"format": "png"}));
        base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().expect("PNG data")).expect("base64")
    }

    /// Holds the page to the layout rules (`layout.js`): no chart text under 10 px and
    /// no two texts, controls or chart labels overlapping. `what` names the page in the
    /// failure. Returns how many texts were checked.
    pub fn assert_layout(&mut self, what: &str) -> u64 {
        let facts = self.eval(include_str!("layout.js"));
        let (small, overlaps) = (&facts["small"], &facts["overlaps"]);
        assert!(
            facts["smallCount"] == 0 && facts["overlapCount"] == 0,
            "{what}: {} chart texts under 10 px, e.g. {small}; {} overlapping pairs, e.g. {overlaps}",
            facts["smallCount"],
            facts["overlapCount"]
        );
        facts["texts"].as_u64().unwrap()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

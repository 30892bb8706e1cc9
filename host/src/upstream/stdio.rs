//! A `command` upstream's child process: the stdio transport under
//! [`super::client::Client`]. It owns the process's life — started at load
//! or on first use, one `initialize`d session for each run, restarted with
//! a capped exponential backoff when it exits, killed (its whole process
//! group) when the upstream is dropped (reload) or the runtime shuts down —
//! and its wire: newline-delimited JSON-RPC on its stdin/stdout, answers
//! matched to the requests waiting for them by id, its stderr logged line by
//! line with `upstream = NAME` (each line cut at a few KiB, at a bounded
//! rate: see [`super::lines`]). Its stdin and stdout are pipes of
//! its own, never Hangar's (which may be serving `--stdio`). It starts with
//! a clean environment: the few variables of [`PASSED_ENV`] and its
//! configured `env`, unless `inherit_env` asks for all of Hangar's.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, watch};

use super::heard::Heard;
use super::lines::{STDERR_LINE_BYTES, log_stderr, read_line};
use super::wire::{
    Handshake, SUPPORTED_VERSIONS, WireError, initialize_message, supported_version,
};
use hangar_config::{PASSED_ENV, StdioCommand};

/// The first wait before a restart; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A run this long resets the backoff (the process was healthy).
const HEALTHY_RUN: Duration = Duration::from_secs(30);
/// The id of each run's own `initialize` (the upstream's ids start at 1).
const INIT_ID: u64 = 0;

/// Where the process is in its life, as callers see it.
#[derive(Clone)]
enum State {
    /// Not started yet (`start = "first-use"`), or starting.
    Starting,
    Up(Arc<Run>),
    /// It exited or could not start; restarting after the backoff.
    Down(String),
}

/// One run of the process: its stdin, the requests waiting for answers.
struct Run {
    stdin: tokio::sync::Mutex<pipe::Sender>,
    /// Request id → where its notifications and answer go.
    pending: Mutex<HashMap<u64, mpsc::UnboundedSender<Value>>>,
    handshake: Mutex<Option<Handshake>>,
}

/// The handle the upstream's client holds; dropping it stops the process.
pub struct StdioProcess {
    shared: Arc<Shared>,
}

/// What the handle and the supervising task share.
struct Shared {
    name: String,
    command: StdioCommand,
    max_line: usize,
    state: watch::Sender<State>,
    stop: watch::Sender<bool>,
    started: AtomicBool,
    /// The running process group's id (0 when none): what a stop kills.
    pgid: AtomicU32,
    /// Its `refresh` is woken when its lists may have changed (a restart,
    /// or a `list_changed` outside a call); updates of watched resources
    /// are announced there.
    heard: Arc<Heard>,
}

impl StdioProcess {
    /// The process for upstream `name`; not started until [`Self::start`]
    /// or the first exchange. Lines longer than `max_line` are dropped.
    pub fn new(
        name: &str,
        command: StdioCommand,
        max_line: usize,
        heard: Arc<Heard>,
    ) -> StdioProcess {
        StdioProcess {
            shared: Arc::new(Shared {
                name: name.to_string(),
                command,
                max_line,
                state: watch::channel(State::Starting).0,
                stop: watch::channel(false).0,
                started: AtomicBool::new(false),
                pgid: AtomicU32::new(0),
                heard,
            }),
        }
    }

    /// Starts the supervising task (once; later calls do nothing).
    pub fn start(&self) {
        if self.shared.started.swap(true, Ordering::AcqRel) {
            return;
        }
        tokio::spawn(supervise(self.shared.clone()));
    }

    /// Whether it has been started.
    pub fn started(&self) -> bool {
        self.shared.started.load(Ordering::Acquire)
    }

    /// The current run, once it is up: waits while it starts, fails fast
    /// while it is down (the caller's timeout bounds the wait).
    async fn run(&self) -> Result<Arc<Run>, WireError> {
        self.start();
        let mut state = self.shared.state.subscribe();
        loop {
            match &*state.borrow_and_update() {
                State::Up(run) => return Ok(run.clone()),
                State::Down(why) => return Err(WireError::Unreachable(why.clone())),
                State::Starting => {}
            }
            if state.changed().await.is_err() {
                return Err(WireError::Unreachable("the process was stopped".into()));
            }
        }
    }

    /// The session of the current run (one per run, opened by the run itself).
    pub async fn handshake(&self) -> Result<Handshake, WireError> {
        let run = self.run().await?;
        let hs = run.handshake.lock().expect("handshake lock").clone();
        hs.ok_or_else(|| WireError::Unreachable("the process is not initialized".into()))
    }

    /// Writes `body`; if it is request `id`, waits for its answer, handing
    /// what comes before it for this request to `on_note`.
    pub async fn exchange(
        &self,
        body: &Value,
        id: Option<u64>,
        on_note: &mut (dyn FnMut(&Value) + Send),
    ) -> Result<Option<Value>, WireError> {
        let run = self.run().await?;
        exchange_on(&run, body, id, on_note).await
    }
}

impl Drop for StdioProcess {
    /// The upstream is gone (a reload dropped or changed it): the process
    /// group is killed now, and the supervising task ends.
    fn drop(&mut self) {
        self.shared.stop.send_replace(true);
        kill_group(self.shared.pgid.swap(0, Ordering::AcqRel));
    }
}

/// One exchange on one run (the supervisor's `initialize` uses it too).
async fn exchange_on(
    run: &Run,
    body: &Value,
    id: Option<u64>,
    on_note: &mut (dyn FnMut(&Value) + Send),
) -> Result<Option<Value>, WireError> {
    let waiting = id.map(|id| {
        let (tx, rx) = mpsc::unbounded_channel();
        run.pending.lock().expect("pending lock").insert(id, tx);
        (Forget { run, id }, rx)
    });
    let mut line = serde_json::to_vec(body).expect("JSON values serialize");
    line.push(b'\n');
    {
        let mut stdin = run.stdin.lock().await;
        let written = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        };
        written
            .await
            .map_err(|_| WireError::Unreachable("the process's stdin is closed".into()))?;
    }
    let Some((_forget, mut rx)) = waiting else {
        return Ok(None);
    };
    while let Some(message) = rx.recv().await {
        if message.get("method").is_some() {
            on_note(&message);
        } else {
            return Ok(Some(message));
        }
    }
    Err(WireError::Unreachable(
        "the process exited before answering".into(),
    ))
}

/// Takes a request off the waiting list however its wait ends (an answer,
/// the caller's timeout or cancellation).
struct Forget<'a> {
    run: &'a Run,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.run
            .pending
            .lock()
            .expect("pending lock")
            .remove(&self.id);
    }
}

/// Runs the process until stopped: start, `initialize`, serve until it
/// exits, wait the backoff, start again.
async fn supervise(shared: Arc<Shared>) {
    let mut stop = shared.stop.subscribe();
    let mut backoff = FIRST_BACKOFF;
    let mut runs = 0u64;
    loop {
        if *stop.borrow() {
            return;
        }
        shared.state.send_replace(State::Starting);
        let began = Instant::now();
        let why = tokio::select! {
            why = run_once(&shared, runs) => why,
            _ = stop.wait_for(|s| *s) => return,
        };
        runs += 1;
        kill_group(shared.pgid.swap(0, Ordering::AcqRel));
        if began.elapsed() >= HEALTHY_RUN {
            backoff = FIRST_BACKOFF;
        }
        let why = format!("the process {why}; restarting in {}", show(backoff));
        tracing::warn!(upstream = %shared.name, "{why}");
        shared.state.send_replace(State::Down(why));
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One run: returns why it ended (said for the log and for callers).
async fn run_once(shared: &Shared, runs: u64) -> String {
    let cmd = &shared.command;
    let mut command = std::process::Command::new(&cmd.program);
    if !cmd.inherit_env {
        command.env_clear();
        for name in PASSED_ENV {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
    }
    command
        .args(&cmd.args)
        .envs(&cmd.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so a stop reaches what it starts too (`uvx`, `npx`).
        .process_group(0);
    if let Some(dir) = &cmd.cwd {
        command.current_dir(dir);
    }
    die_with_parent(&mut command);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return format!("could not start ({}: {e})", cmd.program),
    };
    let pid = child.id();
    shared.pgid.store(pid, Ordering::Release);
    let _group = Group(pid);
    let pipes = (|| {
        let stdin = pipe::Sender::from_owned_fd(OwnedFd::from(child.stdin.take()?)).ok()?;
        let stdout = pipe::Receiver::from_owned_fd(OwnedFd::from(child.stdout.take()?)).ok()?;
        let stderr = pipe::Receiver::from_owned_fd(OwnedFd::from(child.stderr.take()?)).ok()?;
        Some((stdin, stdout, stderr))
    })();
    let Some((stdin, stdout, stderr)) = pipes else {
        return "could not be given its pipes".into();
    };
    if runs == 0 {
        tracing::info!(upstream = %shared.name, pid, "upstream process started");
    } else {
        tracing::info!(upstream = %shared.name, pid, runs, "upstream process restarted");
    }
    let (exit_tx, exit_rx) = tokio::sync::oneshot::channel();
    tokio::task::spawn_blocking(move || {
        let _ = exit_tx.send(child.wait());
    });
    tokio::spawn(log_stderr(
        shared.name.clone(),
        stderr,
        STDERR_LINE_BYTES.min(shared.max_line),
    ));
    let run = Arc::new(Run {
        stdin: tokio::sync::Mutex::new(stdin),
        pending: Mutex::default(),
        handshake: Mutex::default(),
    });
    let serve = async {
        let reading = read_stdout(shared, &run, stdout);
        tokio::pin!(reading);
        tokio::select! {
            hs = initialize(&run) => match hs {
                Ok(hs) => {
                    *run.handshake.lock().expect("handshake lock") = Some(hs);
                    shared.state.send_replace(State::Up(run.clone()));
                    if runs > 0 {
                        shared.heard.refresh.notify_one();
                    }
                }
                Err(e) => return format!("failed to initialize ({e})"),
            },
            why = &mut reading => return why,
        }
        reading.await
    };
    let why = serve.await;
    // Whatever still waits hears that the process is gone.
    run.pending.lock().expect("pending lock").clear();
    kill_group(pid);
    match tokio::time::timeout(Duration::from_secs(5), exit_rx).await {
        Ok(Ok(Ok(status))) => format!("{why} ({status})"),
        _ => why,
    }
}

/// The run's `initialize` and `notifications/initialized`, asking for the
/// newest protocol version first and the next one if that is refused.
async fn initialize(run: &Run) -> Result<Handshake, WireError> {
    let mut last = WireError::Protocol("initialize got no answer".into());
    for version in SUPPORTED_VERSIONS.iter().take(2) {
        let body = initialize_message(version, &json!({}));
        let answer = exchange_on(run, &body, Some(INIT_ID), &mut |_| {}).await?;
        let Some(result) = answer.as_ref().and_then(|a| a.get("result")) else {
            let error = answer.as_ref().and_then(|a| a.get("error"));
            let error = error.map_or_else(|| "no result".to_string(), Value::to_string);
            last = WireError::Protocol(format!("initialize failed: {error}"));
            continue;
        };
        let protocol_version = supported_version(result, version)?;
        let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        exchange_on(run, &note, None, &mut |_| {}).await?;
        return Ok(Handshake {
            bearer: None,
            session_id: None,
            protocol_version,
        });
    }
    Err(last)
}

/// Reads its stdout until it closes, routing each message; returns why it ended.
async fn read_stdout(shared: &Shared, run: &Arc<Run>, stdout: pipe::Receiver) -> String {
    let mut reader = BufReader::new(stdout);
    loop {
        match read_line(&mut reader, shared.max_line).await {
            Ok(Some(line)) => match serde_json::from_slice::<Value>(&line) {
                Ok(message) => route(shared, run, message).await,
                Err(_) if line.iter().all(u8::is_ascii_whitespace) => {}
                Err(_) => tracing::warn!(
                    upstream = %shared.name,
                    "the process wrote a line on stdout that is not JSON-RPC; ignored"
                ),
            },
            Ok(None) => return "exited".into(),
            Err(e) => return format!("broke its stdout ({e})"),
        }
    }
}

/// Hands one message to whoever waits for it: an answer to its request,
/// progress to the request whose token it carries. Anything else the server
/// says (logs, its own requests) names no request over stdio, so it goes to
/// the one request in flight, if only one is; else log messages go to
/// Hangar's log, other notifications are dropped, and requests are answered
/// here (`ping`) or refused (-32601: outside a call there is no client to
/// ask). `list_changed` always wakes a refresh, and a watched resource's
/// update is announced (`updates`).
async fn route(shared: &Shared, run: &Arc<Run>, message: Value) {
    let method = message.get("method").and_then(Value::as_str);
    if shared.heard.note(&message) {
        return;
    }
    let target = {
        let pending = run.pending.lock().expect("pending lock");
        let id = match method {
            None => message.get("id").and_then(Value::as_u64),
            Some(_) => message
                .pointer("/params/progressToken")
                .and_then(Value::as_u64)
                .filter(|t| pending.contains_key(t))
                .or_else(|| only_call(pending.keys())),
        };
        id.and_then(|id| pending.get(&id).cloned())
    };
    if let Some(tx) = target {
        let _ = tx.send(message);
        return;
    }
    // A log message no call takes goes to Hangar's own log.
    if method == Some("notifications/message") {
        let params = message.get("params");
        let level = params.and_then(|p| p.get("level")).and_then(Value::as_str);
        let data = params.and_then(|p| p.get("data")).unwrap_or(&Value::Null);
        tracing::info!(upstream = %shared.name, level = level.unwrap_or("info"), "log: {data}");
        return;
    }
    // A request nobody's call can take: `ping` is answered, the rest refused.
    if let (Some(method), Some(id)) = (method, message.get("id")) {
        let answer = if method == "ping" {
            json!({ "jsonrpc": "2.0", "id": id, "result": {} })
        } else {
            json!({ "jsonrpc": "2.0", "id": id,
                    "error": { "code": -32601, "message": "Method not found" } })
        };
        let _ = exchange_on(run, &answer, None, &mut |_| {}).await;
    }
}

/// The one request in flight (not counting the run's own `initialize`), if
/// exactly one is.
fn only_call<'a>(ids: impl Iterator<Item = &'a u64>) -> Option<u64> {
    let mut calls = ids.filter(|id| **id != INIT_ID);
    let first = calls.next().copied();
    if calls.next().is_some() { None } else { first }
}

/// Kills the process group led by `pid` when dropped (the supervising task
/// ended, or the runtime shut down with it).
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// Asks the kernel to SIGKILL the child when Hangar dies without stopping
/// it (killed, or crashed): a clean stop kills its whole group, but nothing
/// runs on SIGKILL, and an orphaned server would run on with its pipes gone.
/// What the child starts in turn (`npx` → `node`) is not covered: the signal
/// reaches the direct child only.
fn die_with_parent(command: &mut std::process::Command) {
    // The parent as the child will see it; if Hangar dies between the fork
    // and the prctl, the child finds another parent and exits at once.
    // SAFETY: getpid(2) touches no memory.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child before exec and calls
    // only async-signal-safe functions (prctl, getppid, _exit); it
    // allocates nothing.
    unsafe {
        command.pre_exec(move || {
            // The signal is sent when the thread that forked the child
            // exits; tokio's worker threads live as long as the runtime.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// SIGKILL to process group `pgid` (0: none). A group already gone is fine.
fn kill_group(pgid: u32) {
    let Ok(pgid) = i32::try_from(pgid) else {
        return;
    };
    if pgid > 0 {
        // SAFETY: kill(2) with a negative pid signals that process group;
        // it touches no memory of ours.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// A backoff as the log says it.
fn show(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}s", d.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_names_no_request_goes_to_the_only_call_in_flight() {
        assert_eq!(only_call([INIT_ID, 17].iter()), Some(17));
        assert_eq!(only_call([17, 33].iter()), None);
        assert_eq!(only_call([INIT_ID].iter()), None);
    }

    #[test]
    fn the_backoff_reads_as_it_is() {
        assert_eq!(show(FIRST_BACKOFF), "100ms");
        assert_eq!(show(MAX_BACKOFF), "30s");
    }
}

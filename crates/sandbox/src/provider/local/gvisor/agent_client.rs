//! rfs's end of the channel to its agent in a gVisor sandbox
//! ([`super::agent`]): requests are written on the pipe that is the
//! agent's standard input (rfs's lifeline too: closed, the agent and the
//! sandbox end), and a thread reads the agent's frames off the other and
//! hands each command its output, start and end. What the agent says is
//! untrusted: frames of commands rfs did not start are dropped, and a
//! malformed stream ends the channel.

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt as _;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::frames::{self, Decoder, Failed, Start};

/// How many chunks of a command's stdout (and of its stderr) rfs holds
/// before the agent's reader waits for the command's reader: a command
/// that writes faster than rfs reads is held back, as by a pipe, instead
/// of filling rfs's memory (a flood grew rfs by 15 MB a second).
const OUTPUT_CHUNKS: usize = 16;

/// The channel to one sandbox's agent.
#[derive(Debug)]
pub struct Agent {
    requests: Mutex<Option<std::fs::File>>,
    table: Arc<Mutex<Table>>,
    next: AtomicU32,
}

#[derive(Debug, Default)]
struct Table {
    slots: HashMap<u32, Slot>,
    /// Why the channel ended (then no command starts any more).
    ended: Option<String>,
}

/// What rfs waits for of one command.
#[derive(Debug)]
struct Slot {
    started: Option<oneshot::Sender<Result<(), Failed>>>,
    out: Option<mpsc::Sender<Vec<u8>>>,
    err: Option<mpsc::Sender<Vec<u8>>>,
    exit: Option<oneshot::Sender<i32>>,
}

/// A command sent to the agent.
pub struct AgentCmd {
    pub id: u32,
    /// Whether it started (the agent's answer; closed: the sandbox ended).
    pub started: oneshot::Receiver<Result<(), Failed>>,
    pub out: ChannelReader,
    pub err: ChannelReader,
    pub exit: oneshot::Receiver<i32>,
}

impl Agent {
    /// The channel over `requests` (the agent's standard input) and
    /// `responses` (its standard output), once the agent said it runs
    /// (within `within`). Blocking.
    pub fn connect(
        requests: OwnedFd,
        responses: OwnedFd,
        within: Duration,
    ) -> Result<Arc<Agent>, String> {
        let table = Arc::new(Mutex::new(Table::default()));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let t = table.clone();
        std::thread::Builder::new()
            .name("rfs-gvisor-agent".into())
            .spawn(move || read_frames(responses.into(), &t, ready_tx))
            .map_err(|e| format!("cannot start its reader: {e}"))?;
        let agent = Arc::new(Agent {
            requests: Mutex::new(Some(requests.into())),
            table,
            next: AtomicU32::new(1),
        });
        match ready_rx.recv_timeout(within) {
            Ok(Ok(())) => Ok(agent),
            Ok(Err(why)) => Err(why),
            Err(_) => Err(format!("it did not say it runs within {within:?}")),
        }
    }

    /// Ask the agent to start `s`.
    pub fn start(&self, s: &Start) -> Result<AgentCmd, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (started_tx, started) = oneshot::channel();
        let (out_tx, out) = mpsc::channel(OUTPUT_CHUNKS);
        let (err_tx, err) = mpsc::channel(OUTPUT_CHUNKS);
        let (exit_tx, exit) = oneshot::channel();
        {
            let mut t = self.table.lock().expect("agent table");
            if let Some(why) = &t.ended {
                return Err(why.clone());
            }
            t.slots.insert(
                id,
                Slot {
                    started: Some(started_tx),
                    out: Some(out_tx),
                    err: Some(err_tx),
                    exit: Some(exit_tx),
                },
            );
        }
        let payload = serde_json::to_vec(s).map_err(|e| e.to_string())?;
        if let Err(e) = self.send(frames::START, id, &payload) {
            self.forget(id);
            return Err(e);
        }
        Ok(AgentCmd {
            id,
            started,
            out: ChannelReader::new(out),
            err: ChannelReader::new(err),
            exit,
        })
    }

    /// SIGKILL command `id`'s process group inside (and rfs is done with it).
    pub fn kill(&self, id: u32) {
        let _ = self.send(frames::KILL, id, &[]);
    }

    /// Stop handing command `id` anything.
    pub fn forget(&self, id: u32) {
        self.table.lock().expect("agent table").slots.remove(&id);
    }

    /// Close rfs's end: the agent ends, and the gVisor sandbox with it.
    pub fn close(&self) {
        drop(self.requests.lock().expect("agent requests").take());
    }

    fn send(&self, kind: u8, id: u32, payload: &[u8]) -> Result<(), String> {
        let mut w = self.requests.lock().expect("agent requests");
        let Some(f) = w.as_mut() else {
            return Err("the gVisor sandbox was ended".into());
        };
        f.write_all(&frames::encode(kind, id, payload))
            .map_err(|e| format!("cannot write to rfs's agent in the gVisor sandbox: {e}"))
    }
}

/// The reader thread: hand every frame to its command until the agent's
/// output ends (or is not frames); then every command waiting is ended.
fn read_frames(
    mut from: std::fs::File,
    table: &Mutex<Table>,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
) {
    let mut decoder = Decoder::default();
    let mut buf = vec![0u8; frames::CHUNK];
    let why = 'read: loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break "the gVisor sandbox ended (its agent's output closed)".to_owned(),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break format!("cannot read rfs's agent in the gVisor sandbox: {e}"),
        };
        decoder.push(&buf[..n]);
        loop {
            match decoder.next() {
                Ok(None) => break,
                Ok(Some(f)) if f.kind == frames::READY => {
                    let _ = ready.send(if f.payload == frames::HELLO {
                        Ok(())
                    } else {
                        Err(format!(
                            "its agent speaks `{}`, not `{}`",
                            String::from_utf8_lossy(&f.payload),
                            String::from_utf8_lossy(frames::HELLO)
                        ))
                    });
                }
                Ok(Some(f)) => {
                    let handed = dispatch(&mut table.lock().expect("agent table"), f);
                    match handed {
                        Err(e) => break 'read e,
                        // Outside the table's lock: waits while the
                        // command's reader is full (it reads as it can;
                        // dropped, the chunk is dropped).
                        Ok(Some((to, chunk))) => {
                            let _ = to.blocking_send(chunk);
                        }
                        Ok(None) => {}
                    }
                }
                Err(e) => break 'read format!("rfs's agent in the gVisor sandbox sent {e}"),
            }
        }
    };
    let _ = ready.send(Err(why.clone()));
    let mut t = table.lock().expect("agent table");
    for (_, mut slot) in t.slots.drain() {
        if let Some(s) = slot.started.take() {
            let _ = s.send(Err(Failed {
                cwd: false,
                message: why.clone(),
            }));
        }
        // Its sandbox is gone, and the command with it.
        if let Some(e) = slot.exit.take() {
            let _ = e.send(libc::SIGKILL);
        }
    }
    t.ended = Some(why);
}

/// Output to hand to a command's reader (sent by the caller, outside
/// the table's lock).
type Handed = Option<(mpsc::Sender<Vec<u8>>, Vec<u8>)>;

fn dispatch(t: &mut Table, f: frames::Frame) -> Result<Handed, String> {
    let Some(slot) = t.slots.get_mut(&f.id) else {
        return Ok(None);
    };
    match f.kind {
        frames::STARTED => {
            if let Some(s) = slot.started.take() {
                let _ = s.send(Ok(()));
            }
        }
        frames::FAILED => {
            let failed = serde_json::from_slice(&f.payload).unwrap_or_else(|e| Failed {
                cwd: false,
                message: format!("(an unreadable answer: {e})"),
            });
            if let Some(s) = slot.started.take() {
                let _ = s.send(Err(failed));
            }
            t.slots.remove(&f.id);
        }
        frames::STDOUT | frames::STDERR => {
            let to = if f.kind == frames::STDOUT {
                &slot.out
            } else {
                &slot.err
            };
            return Ok(to.clone().map(|to| (to, f.payload)));
        }
        frames::STDOUT_END => slot.out = None,
        frames::STDERR_END => slot.err = None,
        frames::EXIT => {
            let status = <[u8; 4]>::try_from(f.payload.as_slice())
                .map(i32::from_le_bytes)
                .map_err(|_| "an exit status that is not 4 bytes".to_owned())?;
            if let Some(e) = slot.exit.take() {
                let _ = e.send(status);
            }
        }
        k => {
            return Err(format!(
                "rfs's agent in the gVisor sandbox sent frame kind {k}"
            ))
        }
    }
    Ok(None)
}

/// A command started through the agent, as rfs waits for it. Dropped,
/// its process group inside is killed (a drop before its end, or the
/// group's leftovers after).
#[derive(Debug)]
pub struct AgentChild {
    pub(super) agent: Arc<Agent>,
    pub(super) id: u32,
    pub(super) exit: oneshot::Receiver<i32>,
    pub(super) status: Option<std::process::ExitStatus>,
}

impl AgentChild {
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        let raw = (&mut self.exit)
            .await
            .map_err(|_| std::io::Error::other("the gVisor sandbox's agent forgot the command"))?;
        let s = std::process::ExitStatus::from_raw(raw);
        self.status = Some(s);
        Ok(s)
    }

    /// What kills its process group inside.
    pub fn group(&self) -> AgentGroup {
        AgentGroup {
            agent: self.agent.clone(),
            id: self.id,
        }
    }
}

impl Drop for AgentChild {
    fn drop(&mut self) {
        self.agent.kill(self.id);
        self.agent.forget(self.id);
    }
}

/// Kills one agent command's process group inside gVisor.
#[derive(Debug, Clone)]
pub struct AgentGroup {
    agent: Arc<Agent>,
    id: u32,
}

impl AgentGroup {
    pub fn kill(&self) {
        self.agent.kill(self.id);
    }
}

/// One output stream of an agent command, as an `AsyncRead`.
pub struct ChannelReader {
    rx: mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
    at: usize,
}

impl ChannelReader {
    fn new(rx: mpsc::Receiver<Vec<u8>>) -> ChannelReader {
        ChannelReader {
            rx,
            buf: vec![],
            at: 0,
        }
    }
}

impl tokio::io::AsyncRead for ChannelReader {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        while this.at == this.buf.len() {
            match this.rx.poll_recv(cx) {
                Poll::Ready(Some(chunk)) => {
                    this.buf = chunk;
                    this.at = 0;
                }
                // The end: nothing more is read.
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
        let n = out.remaining().min(this.buf.len() - this.at);
        out.put_slice(&this.buf[this.at..this.at + n]);
        this.at += n;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a command's output was handed to rfs through an
    /// unbounded channel, so a step under gVisor writing faster than rfs
    /// read grew rfs's memory without end (15 MB a second with `head -c
    /// 1500000000 /dev/zero`). rfs now holds at most [`OUTPUT_CHUNKS`]
    /// chunks a stream; then the agent's writes wait, as a pipe's do.
    #[test]
    fn a_command_whose_output_nobody_reads_holds_back_the_agent_not_rfs_memory() {
        let pipe = || crate::provider::input::pipe_cloexec().unwrap();
        let ((req_r, req_w), (ans_r, ans_w)) = (pipe(), pipe());
        let mut answers = std::fs::File::from(ans_w);
        answers
            .write_all(&frames::encode(frames::READY, 0, frames::HELLO))
            .unwrap();
        let agent = Agent::connect(req_w, ans_r, Duration::from_secs(5)).unwrap();
        let cmd = agent
            .start(&Start {
                argv: vec!["flood".into()],
                env: vec![],
                cwd: "/".into(),
            })
            .unwrap();
        // The fake agent writes chunks of the command's stdout without
        // blocking until rfs's end stops taking them.
        // SAFETY: fcntl on a descriptor this test owns.
        unsafe {
            use std::os::fd::AsRawFd as _;
            libc::fcntl(answers.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
        }
        const PAYLOAD: usize = 16 << 10;
        let chunk = frames::encode(frames::STDOUT, cmd.id, &vec![b'x'; PAYLOAD]);
        // Bytes written, frame after frame (a write may take part of one).
        let mut bytes = 0;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut stalled_since = std::time::Instant::now();
        while std::time::Instant::now() < deadline && bytes < 1000 * chunk.len() {
            let at = bytes % chunk.len();
            match answers.write(&chunk[at..]) {
                Ok(n) => {
                    bytes += n;
                    stalled_since = std::time::Instant::now();
                }
                // Wait until it stays full (rfs's reader has room left
                // for a while).
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if stalled_since.elapsed() > Duration::from_millis(500) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("{e}"),
            }
        }
        let written = bytes / chunk.len();
        // The channel's 16, the chunk being handed, what the reader read
        // ahead (64 KiB) and what the pipe buffers (64 KiB): about 26.
        assert!(
            written <= 30,
            "rfs took {written} chunks of {PAYLOAD} bytes nobody read"
        );
        drop(req_r);
        drop(cmd);
    }
}

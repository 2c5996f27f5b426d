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
    out: Option<mpsc::UnboundedSender<Vec<u8>>>,
    err: Option<mpsc::UnboundedSender<Vec<u8>>>,
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
        let (out_tx, out) = mpsc::unbounded_channel();
        let (err_tx, err) = mpsc::unbounded_channel();
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
                    if let Err(e) = dispatch(&mut table.lock().expect("agent table"), f) {
                        break 'read e;
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

fn dispatch(t: &mut Table, f: frames::Frame) -> Result<(), String> {
    let Some(slot) = t.slots.get_mut(&f.id) else {
        return Ok(());
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
            if let Some(to) = to {
                let _ = to.send(f.payload);
            }
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
    Ok(())
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
    rx: mpsc::UnboundedReceiver<Vec<u8>>,
    buf: Vec<u8>,
    at: usize,
}

impl ChannelReader {
    fn new(rx: mpsc::UnboundedReceiver<Vec<u8>>) -> ChannelReader {
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

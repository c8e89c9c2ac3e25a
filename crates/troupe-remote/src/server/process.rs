//! A child process that has not been reaped, so that signalling it is sound by construction.

use std::io;
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus};

/// A child process this program started and has not reaped (waited for) yet.
///
/// The kernel keeps a child's process id for it until its parent reaps it, even after it
/// exited, so a signal sent to that id reaches this child and no other process. The type
/// keeps that true: it is made only by spawning, and every way to reap it consumes it
/// ([`try_reap`](Unreaped::try_reap) hands it back when the child still runs).
#[derive(Debug)]
pub struct Unreaped(Child);

impl Unreaped {
    /// Starts `cmd`.
    pub fn spawn(cmd: &mut Command) -> io::Result<Self> {
        cmd.spawn().map(Unreaped)
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// Its standard output, if piped and not taken yet.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.0.stdout.take()
    }

    /// Its standard error, if piped and not taken yet.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.0.stderr.take()
    }

    /// Sends `signal` (SIGSTOP, SIGCONT, ...) to it.
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        let pid = libc::pid_t::try_from(self.0.id())
            .map_err(|_| io::Error::other("a process id out of range"))?;
        // SAFETY: kill(2) reads and writes no memory of this process. `pid` is this child's,
        // which is not reaped (the type's invariant: only a consuming method reaps it), so the
        // kernel has not given the id to another process.
        if unsafe { libc::kill(pid, signal) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Reaps it if it has ended: its exit status; else (or if it cannot be asked) it back.
    pub fn try_reap(mut self) -> Result<ExitStatus, Self> {
        match self.0.try_wait() {
            Ok(Some(status)) => Ok(status),
            _ => Err(self),
        }
    }

    /// Kills it (SIGKILL) and reaps it.
    pub fn kill_and_reap(mut self) -> io::Result<ExitStatus> {
        let _ = self.0.kill();
        self.0.wait()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    /// Every path to the signal: a running child, a stopped and continued one, one that has
    /// exited but is not reaped yet (the id still its own), then reaped by `try_reap`.
    #[test]
    fn a_child_is_signalled_until_it_is_reaped() {
        let mut sleep = Command::new("sleep");
        sleep.arg("30").stdin(Stdio::null());
        let child = Unreaped::spawn(&mut sleep).unwrap();
        child.signal(libc::SIGSTOP).unwrap();
        child.signal(libc::SIGCONT).unwrap();
        let child = child.try_reap().expect_err("still running");
        child.signal(libc::SIGTERM).unwrap();
        // Exited (by the signal) but not reaped: the id is still this child's.
        std::thread::sleep(std::time::Duration::from_millis(100));
        child.signal(0).unwrap();
        let mut child = child;
        let status = loop {
            match child.try_reap() {
                Ok(status) => break status,
                Err(again) => {
                    child = again;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
        };
        assert!(!status.success());

        let mut sleep = Command::new("sleep");
        sleep.arg("30");
        let status = Unreaped::spawn(&mut sleep)
            .unwrap()
            .kill_and_reap()
            .unwrap();
        assert!(!status.success());
    }
}

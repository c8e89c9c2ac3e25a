//! The matching-engine actor, in its two roles, and the pair protocol between them.
//!
//! # An order through a pair
//! 1. A receiver tells the primary `Place(order)`.
//! 2. The primary checks the order against its shard (known book, new key). An order whose
//!    key the books hold goes no further: it is a resend of an order the exchange has (a
//!    client resends after `EngineUnavailable` or a time-out, keeping the client order id),
//!    and is answered `DuplicateClientOrderId` once everything applied so far is committed as
//!    step 4 says (by then the earlier order is, too). So a duplicate answer promises what an
//!    acceptance does, and a client may count it as one. If that can no longer be promised (a
//!    request-reply primary whose standby ended), the resend is refused with
//!    `EngineUnavailable`. Where the standby answers for the pair (request-reply without
//!    fsync, step 4), the primary sends the resend to it as `AnswerDuplicate`, behind every
//!    order sent before, and the standby answers it.
//! 3. With fsync, and in one-way style, the primary tells its standby the order first
//!    (`Replicate`, or `ReplicateAnswered` when the standby answers too), so the standby
//!    matches and logs in parallel, then applies the order to its own shard (match, append to
//!    the log). In request-reply style without fsync it applies the order first and then
//!    forwards it (`ReplicateAnswered`): the standby's answer then promises both copies.
//!    There the apply is the check (an apply that refuses changes nothing), so the books are
//!    looked up once per order, not twice.
//! 4. Each engine makes its log durable in batches (group commit, below) and then
//!    acknowledges what the batch covered:
//!    - **request-reply with fsync**: the standby tells the primary `Replicated { upto }` (a
//!      watermark: every order up to that sequence number is applied and logged there); the
//!      primary sends the client its [`Ack`] once both its own flush and the standby's
//!      watermark have passed the order.
//!    - **request-reply without fsync** (no log, or a buffered one, where an order is
//!      committed as it is applied): the standby sends the client the one [`Ack`] for the pair
//!      once it has applied the order, which the primary had applied before forwarding it. No
//!      watermark travels back: four messages per order instead of five.
//!    - **one-way**: each engine sends the client its own `Ack`; the client counts two.
//!
//! Orders reach the standby in the primary's order (one sender, one mailbox), so both apply
//! the same sequence and their states stay equal.
//!
//! # Group commit
//! In fsync mode an applied order waits in `pending` until a flush covers it, and the engine
//! never waits for the disk itself. The first order of a batch sends the engine a `WriteOut`
//! marker to itself; the marker queues behind every order already in the mailbox, so when it
//! is handled one `write` puts all of them in the file (the OS's page cache) and hands them to
//! the log's flusher (`flush.rs`): a thread of the log's own that runs `fdatasync` back to
//! back, each flush covering everything written before it began (it is started with the
//! engine's first batch). After each flush the flusher tells the engine `Durable { upto }`,
//! and the engine acknowledges what that covers; on a request-reply standby the flusher sends
//! the primary the watermark `Replicated { upto }` itself, one hop sooner than through the
//! standby. So the next batch is written, and the standby gets its orders, while the previous
//! flush runs; an order waits for at most the rest of the flush in progress when it was
//! written, then its own. Since no engine waits for the disk (a `write` into the page
//! cache takes microseconds), engines run on the system's worker pool in every mode; only
//! `SyncLog` and stopping wait for a flush. Without a log, or with a buffered one (whose
//! records are in the OS's page cache as soon as they are appended), an order is committed as
//! soon as it is applied.
//!
//! The durability rule: an order is acknowledged only after an `fdatasync` that began after
//! its record was written, on both engines of its pair (request-reply: the primary waits for
//! its own durable mark and the standby's watermark; one-way: each engine acks on its own
//! durable mark and the client waits for both).
//!
//! # Failure
//! If the log cannot be written or flushed (the flusher reports a failed `fdatasync` with
//! `LogFailed`), durability can no longer be promised: the engine answers every pending order
//! with [`RejectReason::EngineUnavailable`] (their fate on disk is unknown: recovery tells),
//! reports the error, and stops; receivers then reject orders for its books. As it stops, the
//! engine flushes what it has applied and stops the flusher, joining its thread.
//!
//! An engine that stops for any reason (a log failure, a panic, `stop`, shutdown) leaves no
//! order without an answer:
//! - as it stops, once its log is flushed, it acknowledges what that flush covers (a
//!   request-reply standby sends its primary the final watermark);
//! - whatever it still holds is refused with `EngineUnavailable` when the engine is dropped;
//! - a request-reply primary watches its standby: when the standby ends, the primary refuses
//!   every pending order the standby's last watermark does not cover (new orders are refused
//!   already, as `Replicate` cannot reach a stopped standby);
//! - where the standby answers the client itself (one-way, and request-reply without fsync),
//!   the order goes to it in a `ReplicateAnswered`: an order the standby never handled (still
//!   in its mailbox when it stopped) comes back to the standby as it stops
//!   (`Handler::undelivered`), which refuses it, and so does a resend's `AnswerDuplicate`
//!   (request-reply's `Replicate` needs nothing: the primary answers);
//! - a request-reply primary without fsync whose own log write fails refuses the order it was
//!   applying (its standby was to answer it, and will not get it);
//! - so does each `Place`: an order still in a primary's mailbox when the primary stopped is
//!   refused by the primary as it stops (found by the simulation tests: a primary that crashed
//!   with orders queued left them unanswered). A failed engine gets them back too.
//!
//! Every order message fits the runtime's 24-byte inline envelope: no allocation per hop.
//! (Until the runtime gave undelivered messages back, `Place` and the one-way replica each
//! carried a guard that answered from its destructor: a reference-counted pointer to the
//! sessions, which made them too large to be inline. Without the guards the closed loop at
//! 40 clients ran 10 % faster; see the crate's README, "Baselines".)
//!
//! # Tried and left: batching between the engines, and (with a guard) the standby answering
//! Both were built and measured (`bench compare`, which gives messages, actor turns and CPU
//! time per order; figures in the crate's README, "Baselines"):
//! - Forwarding orders to the standby in batches, one message per batch: sent when the
//!   previous batch's watermark came back, or at an end-of-batch marker the primary sends
//!   itself. The runtime hands a message to an idle actor and runs it next on the same
//!   worker, so an order's hops run one after another and a mailbox rarely holds a second
//!   order when its actor runs: at 40 clients a batch held 1.5 orders by watermark and 1.0
//!   by marker (which adds a message of its own), and turns per order fell by 5% at most.
//! - In request-reply without fsync, the primary committing first and the standby answering
//!   the client for the pair (no watermark back): one message and 0.85 turns fewer per order,
//!   but the standby's copy then needed a guard, an allocation per order. CPU time per order
//!   and throughput were the same as with the watermark, at 1 and at 40 clients, so it was
//!   left. Once the runtime gave undelivered messages back (no guard, no allocation), it was
//!   built again and kept: see step 4 and the crate's README, "Baselines".
//!
//! A log whose write failed stays failed (see `log.rs`): what was applied after the last good
//! write is not in the log, so the stopping engine neither acknowledges it nor, as a standby,
//! reports it in a final watermark (found by the simulation tests: a standby whose write
//! failed reported the lost records as replicated, and the primary acknowledged orders only
//! its own log held).

use std::collections::VecDeque;
use std::sync::Arc;

use troupe::{Actor, Addr, Context, Handler, Message, Terminated};

use crate::book::Fill;
use crate::log::{LogError, LogMode};
use crate::order::{Ack, ClientId, Order, OrderKey, Outcome, RejectReason, Role};
use crate::session::Sessions;
use crate::shard::Shard;

/// Prints an engine's rare events (a log failure, a standby lost) on stderr; in a simulation
/// (`troupe::sim`), whose thousands of runs inject such faults on purpose, prints nothing.
macro_rules! report {
    ($($arg:tt)*) => {
        if !troupe::sim::is_simulated() {
            eprintln!($($arg)*);
        }
    };
}

/// How acknowledgements travel (the seed's two messaging styles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Style {
    /// The primary waits for its standby and sends the client one ack when both are done.
    RequestReply,
    /// Each engine acks the client on its own; the client waits for both.
    OneWay,
}

impl Style {
    /// The name the command line uses.
    pub fn name(self) -> &'static str {
        match self {
            Style::RequestReply => "request-reply",
            Style::OneWay => "one-way",
        }
    }

    /// Acks a client receives for an accepted order.
    pub fn acks_per_order(self) -> usize {
        match self {
            Style::RequestReply => 1,
            Style::OneWay => 2,
        }
    }
}

impl std::str::FromStr for Style {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "request-reply" => Ok(Style::RequestReply),
            "one-way" => Ok(Style::OneWay),
            other => Err(format!(
                "unknown style `{other}`; use request-reply or one-way"
            )),
        }
    }
}

/// A validated order, routed to the primary that owns its book. If the primary stops with it
/// still in its mailbox, the primary refuses it as it stops (`undelivered`).
pub(crate) struct Place(pub(crate) Order);
impl Message for Place {
    type Reply = ();
}

/// An order the primary accepted, for its standby, in request-reply style (the primary answers
/// the client, and watches its standby).
struct Replicate(Order);
impl Message for Replicate {
    type Reply = ();
}

/// An order the primary accepted, for a standby that answers the client itself (one-way
/// style, and request-reply without fsync: see `Engine::standby_answers`); the standby refuses
/// it if it stops first (`undelivered`).
struct ReplicateAnswered(Order);
impl Message for ReplicateAnswered {
    type Reply = ();
}

/// A resend of an order the primary's books hold, for a standby that answers for the pair:
/// answered `DuplicateClientOrderId` once the standby has applied everything sent before it.
struct AnswerDuplicate(Order);
impl Message for AnswerDuplicate {
    type Reply = ();
}

// Each fits the runtime's inline envelope: no allocation per message.
const _: () = assert!(std::mem::size_of::<Place>() <= 24);
const _: () = assert!(std::mem::size_of::<Replicate>() <= 24);
const _: () = assert!(std::mem::size_of::<ReplicateAnswered>() <= 24);
const _: () = assert!(std::mem::size_of::<AnswerDuplicate>() <= 24);

/// The standby's watermark: every order up to `upto` is applied and committed there.
struct Replicated {
    upto: u64,
}
impl Message for Replicated {
    type Reply = ();
}

/// The group-commit marker an engine sends itself: write the batch and hand it to the flusher.
struct WriteOut;
impl Message for WriteOut {
    type Reply = ();
}

/// From the log's flusher: every record up to `upto` is on disk.
struct Durable {
    upto: u64,
}
impl Message for Durable {
    type Reply = ();
}

/// From the log's flusher: a flush failed, nothing more becomes durable.
struct LogFailed(LogError);
impl Message for LogFailed {
    type Reply = ();
}

/// Tells a standby where to send its watermarks (request-reply).
pub(crate) struct SetPrimary(pub(crate) Addr<Engine>);
impl Message for SetPrimary {
    type Reply = ();
}

/// Asks an engine for a summary of its state.
pub(crate) struct GetState;
impl Message for GetState {
    type Reply = EngineState;
}

/// Asks an engine for the keys of every order it has accepted.
pub(crate) struct GetAcceptedKeys;
impl Message for GetAcceptedKeys {
    type Reply = Vec<OrderKey>;
}

/// Asks an engine to write and fsync everything it has applied.
pub(crate) struct SyncLog;
impl Message for SyncLog {
    type Reply = Result<(), String>;
}

/// A summary of one engine's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineState {
    /// The engine's pair.
    pub pair: usize,
    /// Primary or standby.
    pub role: Role,
    /// Orders applied (the last sequence number).
    pub applied: u64,
    /// Orders committed to the log and acknowledged (or ready to be).
    pub committed: u64,
    /// Log commits made (each covers a batch of orders: group commit).
    pub commits: u64,
    /// Trades made.
    pub trades: u64,
    /// Volume traded.
    pub traded_volume: u64,
    /// Orders resting in the books.
    pub resting: usize,
    /// Stable hash of the books (see [`Shard::state_hash`]).
    pub state_hash: u64,
}

/// An answer waiting for the commit of `seq` (and, on a request-reply primary, its standby's):
/// an applied order's acceptance, or a duplicate answer.
struct Pending {
    seq: u64,
    client: ClientId,
    client_order_id: u64,
    outcome: Outcome,
}

/// A matching engine: a primary or a standby. See the module note.
pub struct Engine {
    shard: Shard,
    style: Style,
    mode: LogMode,
    sessions: Arc<Sessions>,
    /// On a primary: its standby.
    standby: Option<Addr<Engine>>,
    /// On a request-reply standby: its primary.
    primary: Option<Addr<Engine>>,
    pending: VecDeque<Pending>,
    /// Every order up to this sequence number is committed (fsync mode: durable) here.
    committed: u64,
    /// On a primary: every order up to this sequence number is committed on the standby.
    standby_committed: u64,
    /// On a standby: the last watermark sent.
    reported: u64,
    /// On a request-reply primary: its standby has ended (no watermark will come).
    standby_gone: bool,
    write_scheduled: bool,
    /// In fsync mode: the log's flusher has been started.
    flusher_started: bool,
}

impl Actor for Engine {
    fn started(&mut self, ctx: &mut Context<Self>) {
        // A request-reply primary's pending orders wait for its standby's watermarks: it must
        // hear when none will come.
        if self.style == Style::RequestReply {
            if let Some(standby) = self.standby.clone() {
                ctx.watch(&standby);
            }
        }
    }

    fn stopping(&mut self, _ctx: &mut Context<Self>) {
        // A clean stop leaves every applied order on disk, acknowledged or not, and the
        // flusher's thread joined.
        match self.shard.close() {
            Ok(()) => {
                // Everything applied is now on disk here: acknowledge what that covers.
                let upto = self.shard.applied();
                self.committed = self.committed.max(upto);
                // A request-reply standby in fsync mode leaves watermarks to its flusher,
                // which is gone now: the last one goes from here.
                if let (Role::Standby, Style::RequestReply, LogMode::Fsync, Some(primary)) =
                    (self.role(), self.style, self.mode, &self.primary)
                {
                    let _ = primary.tell(Replicated { upto });
                }
                self.release();
            }
            Err(e) => report!(
                "pair {} {}: could not flush the log while stopping: {e}",
                self.shard.pair(),
                self.shard.role()
            ),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Whatever way the engine ended, nothing will answer these any more.
        let _ = self.refuse_pending(|_| true);
    }
}

impl Engine {
    /// An engine over a shard that has replayed its log (everything in it is committed).
    pub(crate) fn new(
        shard: Shard,
        style: Style,
        mode: LogMode,
        sessions: Arc<Sessions>,
        standby: Option<Addr<Engine>>,
    ) -> Self {
        let applied = shard.applied();
        Engine {
            shard,
            style,
            mode,
            sessions,
            standby,
            primary: None,
            pending: VecDeque::new(),
            committed: applied,
            standby_committed: applied,
            reported: applied,
            standby_gone: false,
            write_scheduled: false,
            flusher_started: false,
        }
    }

    fn role(&self) -> Role {
        self.shard.role()
    }

    /// Whether the standby answers the client for the pair: in one-way style (each engine
    /// answers), and in request-reply style without fsync, where an order is committed as soon
    /// as it is applied: the primary applies it, then forwards it, and the standby answers once
    /// it has applied it too (no watermark back). With fsync the primary answers once its own
    /// flush and the standby's watermark cover the order.
    fn standby_answers(&self) -> bool {
        self.style == Style::OneWay || self.mode != LogMode::Fsync
    }

    /// Whether this engine acknowledges the orders it applies.
    fn answers(&self) -> bool {
        match (self.role(), self.style) {
            (_, Style::OneWay) => true,
            // A primary without a standby has no one to answer for it.
            (Role::Primary, Style::RequestReply) => {
                !self.standby_answers() || self.standby.is_none()
            }
            (Role::Standby, Style::RequestReply) => self.standby_answers(),
        }
    }

    /// Tells the standby `msg`; false if there is none or it has stopped. (A borrow, not a
    /// clone of its address: no reference count touched per order.)
    fn tell_standby<M: Message>(&self, msg: M) -> bool
    where
        Engine: Handler<M>,
    {
        self.standby
            .as_ref()
            .is_some_and(|standby| standby.tell(msg).is_ok())
    }

    /// An order this engine accepted into its mailbox but stops before handling: refused
    /// with `EngineUnavailable` (it was never applied here).
    fn refuse_unhandled(&self, order: &Order) {
        self.ack(
            order.client(),
            order.client_order_id(),
            Outcome::Rejected(RejectReason::EngineUnavailable),
        );
    }

    fn ack(&self, client: ClientId, client_order_id: u64, outcome: Outcome) {
        // A client that has gone away needs no ack.
        let _ = self.sessions.deliver(
            client,
            Ack {
                client_order_id,
                outcome,
                from: self.role(),
            },
        );
    }

    /// Applies an order (already checked) and schedules its acknowledgement if this engine
    /// answers. False if it was refused, or the log failed (the engine is stopping).
    fn apply(&mut self, order: &Order, ctx: &mut Context<Self>) -> bool {
        let fill = match self.shard.apply(order) {
            Ok(fill) => fill,
            Err(reason) => {
                // A primary checks before replicating, so this is a standby that diverged:
                // a bug, reported loudly; the order is refused here too.
                report!(
                    "pair {} {}: order {:?} refused on apply: {reason}",
                    self.shard.pair(),
                    self.role(),
                    order.key()
                );
                self.ack(
                    order.client(),
                    order.client_order_id(),
                    Outcome::Rejected(reason),
                );
                return false;
            }
        };
        self.applied(order, fill, ctx)
    }

    /// Refuses an order that a check (or an apply, which checks first and changes nothing
    /// when it refuses) found unfit: a resend of an order the books hold is answered as such
    /// (see `answer_duplicate`), anything else rejected.
    fn refuse(&mut self, order: &Order, reason: RejectReason) {
        match reason {
            RejectReason::DuplicateClientOrderId => self.answer_duplicate(order),
            reason => self.ack(
                order.client(),
                order.client_order_id(),
                Outcome::Rejected(reason),
            ),
        }
    }

    /// What follows an order's apply: its acknowledgement scheduled if this engine answers,
    /// and the log committed as the mode says. False if the log failed (the engine is
    /// stopping).
    fn applied(&mut self, order: &Order, fill: Fill, ctx: &mut Context<Self>) -> bool {
        let seq = self.shard.applied();
        let answer = self.answers().then(|| Pending {
            seq,
            client: order.client(),
            client_order_id: order.client_order_id(),
            outcome: Outcome::Accepted {
                filled: fill.filled,
            },
        });
        if self.mode == LogMode::Fsync {
            self.pending.extend(answer);
            if !self.write_scheduled {
                self.write_scheduled = true;
                // If the send fails we are stopping; `stopping` flushes the log.
                let _ = ctx.myself().tell(WriteOut);
            }
            return true;
        }
        // In memory, or already in the OS's hands (a buffered log maps its file).
        if let Err(e) = self.shard.commit() {
            match answer {
                // Refused with everything pending, as the engine stops.
                Some(answer) => self.pending.push_back(answer),
                // Not pending here (the standby would have answered it): refused now.
                None => self.refuse_unhandled(order),
            }
            self.fail(&e, ctx);
            return false;
        }
        self.committed = seq;
        if let Some(answer) = answer {
            if self.pending.is_empty() && self.answers_upto().is_some_and(|upto| seq <= upto) {
                // Nothing ahead of it and nothing to wait for: answered without a round
                // through the queue, whose slot was a cache miss per order at one worker
                // (`release` held 6 % of its samples, most of them on that load). Nothing
                // else is pending, so there is nothing more to release.
                self.ack(answer.client, answer.client_order_id, answer.outcome);
                return true;
            }
            self.pending.push_back(answer);
        }
        self.release();
        true
    }

    /// How far this engine may answer: the sequence number up to which its pending answers
    /// are promised. `None` for a request-reply standby that does not answer (the primary
    /// answers once the standby's watermark covers an order).
    fn answers_upto(&self) -> Option<u64> {
        match (self.role(), self.style) {
            (Role::Primary, Style::RequestReply) => {
                Some(self.committed.min(self.standby_committed))
            }
            // Without fsync it answers the client itself (see `standby_answers`).
            (Role::Standby, Style::RequestReply) if self.standby_answers() => Some(self.committed),
            (Role::Standby, Style::RequestReply) => None,
            (_, Style::OneWay) => Some(self.committed),
        }
    }

    /// Sends every acknowledgement the watermarks allow.
    fn release(&mut self) {
        let Some(upto) = self.answers_upto() else {
            // A request-reply standby that does not answer reports its watermark instead. In
            // fsync mode the flusher sends it itself.
            if self.mode != LogMode::Fsync && self.committed > self.reported {
                self.reported = self.committed;
                if let Some(primary) = &self.primary {
                    let _ = primary.tell(Replicated {
                        upto: self.committed,
                    });
                }
            }
            return;
        };
        while let Some(p) = self.pending.front() {
            if p.seq > upto {
                break;
            }
            let p = self.pending.pop_front().expect("front exists");
            self.ack(p.client, p.client_order_id, p.outcome);
        }
    }

    /// Starts the log's flusher (fsync mode). After each flush it tells this engine
    /// `Durable`; on a request-reply standby it also sends the primary the watermark
    /// `Replicated` itself, one hop sooner than through this engine.
    fn start_flusher(&mut self, ctx: &mut Context<Self>) -> Result<(), LogError> {
        let me = ctx.myself();
        let primary = match (self.role(), self.style) {
            (Role::Standby, Style::RequestReply) => self.primary.clone(),
            _ => None,
        };
        self.shard.start_flusher(move |flushed| {
            // If an engine has stopped, nothing waits for the news.
            let _ = match flushed {
                Ok(upto) => {
                    if let Some(primary) = &primary {
                        let _ = primary.tell(Replicated { upto });
                    }
                    me.tell(Durable { upto }).is_ok()
                }
                Err(e) => me.tell(LogFailed(e)).is_ok(),
            };
        })
    }

    /// Answers a resend of an order the books hold (see the module note, step 2): once
    /// everything applied so far is committed, or at once with `EngineUnavailable` if that can
    /// no longer be promised.
    fn answer_duplicate(&mut self, order: &Order) {
        if self.role() == Role::Primary && !self.answers() {
            // The standby answers for the pair: the resend goes behind everything sent to it.
            if !self.tell_standby(AnswerDuplicate(*order)) {
                self.refuse_unhandled(order);
            }
            return;
        }
        let seq = self.shard.applied();
        let (client, client_order_id) = (order.client(), order.client_order_id());
        if self.standby_gone && seq > self.standby_committed {
            let refused = Outcome::Rejected(RejectReason::EngineUnavailable);
            return self.ack(client, client_order_id, refused);
        }
        // Answers wait in sequence order: `seq` is the highest applied.
        self.pending.push_back(Pending {
            seq,
            client,
            client_order_id,
            outcome: Outcome::Rejected(RejectReason::DuplicateClientOrderId),
        });
        self.release();
    }

    fn fail(&mut self, error: &dyn std::fmt::Display, ctx: &mut Context<Self>) {
        report!(
            "pair {} {}: log failure, stopping the engine: {error}",
            self.shard.pair(),
            self.role()
        );
        let _ = self.refuse_pending(|_| true);
        ctx.stop();
    }

    /// Refuses, with `EngineUnavailable`, every pending order `which` selects (their fate on
    /// disk is unknown: recovery tells); the others stay pending, in order.
    /// Returns how many.
    fn refuse_pending(&mut self, which: impl Fn(&Pending) -> bool) -> usize {
        let (refused, kept): (VecDeque<Pending>, VecDeque<Pending>) =
            std::mem::take(&mut self.pending)
                .into_iter()
                .partition(which);
        self.pending = kept;
        for p in &refused {
            self.ack(
                p.client,
                p.client_order_id,
                Outcome::Rejected(RejectReason::EngineUnavailable),
            );
        }
        refused.len()
    }

    fn state(&self) -> EngineState {
        EngineState {
            pair: self.shard.pair(),
            role: self.role(),
            applied: self.shard.applied(),
            committed: self.committed,
            commits: self.shard.commits(),
            trades: self.shard.trades(),
            traded_volume: self.shard.traded_volume(),
            resting: self.shard.resting(),
            state_hash: self.shard.state_hash(),
        }
    }
}

impl Handler<Place> for Engine {
    fn handle(&mut self, Place(order): Place, ctx: &mut Context<Self>) {
        if self.standby.is_none() || !self.answers() {
            // Applied here first: without a standby there is nothing else to do, and when the
            // standby answers for the pair, the order is here before it goes there, so an
            // answer promises both copies. The apply checks the order itself.
            let fill = match self.shard.apply(&order) {
                Ok(fill) => fill,
                Err(reason) => return self.refuse(&order, reason),
            };
            if self.applied(&order, fill, ctx)
                && self.standby.is_some()
                && !self.tell_standby(ReplicateAnswered(order))
            {
                // Without its standby the pair cannot promise two copies (the order stays in
                // this engine's books: `EngineUnavailable` leaves its fate to recovery).
                self.refuse_unhandled(&order);
            }
            return;
        }
        // Checked before it goes to the standby, which matches and logs in parallel.
        if let Err(reason) = self.shard.check(&order) {
            return self.refuse(&order, reason);
        }
        let sent = match self.style {
            Style::RequestReply => self.tell_standby(Replicate(order)),
            Style::OneWay => self.tell_standby(ReplicateAnswered(order)),
        };
        if !sent {
            // Without its standby the pair cannot promise two copies.
            self.refuse_unhandled(&order);
            return;
        }
        self.apply(&order, ctx);
    }

    /// The primary stops with this order still queued: refused on its behalf.
    fn undelivered(&mut self, Place(order): Place, _ctx: &mut Context<Self>) {
        self.refuse_unhandled(&order);
    }
}

impl Handler<Replicate> for Engine {
    fn handle(&mut self, Replicate(order): Replicate, ctx: &mut Context<Self>) {
        self.apply(&order, ctx);
    }
}

impl Handler<ReplicateAnswered> for Engine {
    fn handle(&mut self, ReplicateAnswered(order): ReplicateAnswered, ctx: &mut Context<Self>) {
        self.apply(&order, ctx);
    }

    /// This standby answers the client itself: it stops with this order still queued, so it
    /// refuses it.
    fn undelivered(&mut self, ReplicateAnswered(order): ReplicateAnswered, _: &mut Context<Self>) {
        self.refuse_unhandled(&order);
    }
}

impl Handler<AnswerDuplicate> for Engine {
    /// Everything the primary sent before this resend is applied (and, without fsync,
    /// committed) here: the duplicate answer promises what an acceptance does.
    fn handle(&mut self, AnswerDuplicate(order): AnswerDuplicate, _: &mut Context<Self>) {
        self.answer_duplicate(&order);
    }

    fn undelivered(&mut self, AnswerDuplicate(order): AnswerDuplicate, _: &mut Context<Self>) {
        self.refuse_unhandled(&order);
    }
}

impl Handler<Terminated> for Engine {
    fn handle(&mut self, msg: Terminated, _ctx: &mut Context<Self>) {
        if self.standby.as_ref().map(Addr::id) != Some(msg.id) {
            return;
        }
        // No watermark will come: what the last one does not cover cannot be promised on two
        // copies. What it covers is acknowledged as this engine's own flushes reach it.
        self.standby_gone = true;
        let covered = self.standby_committed;
        let refused = self.refuse_pending(|p| p.seq > covered);
        if refused > 0 {
            report!(
                "pair {} primary: the standby ended ({:?}); refused {refused} orders it had not committed",
                self.shard.pair(),
                msg.reason
            );
        }
    }
}

impl Handler<Replicated> for Engine {
    fn handle(&mut self, msg: Replicated, _ctx: &mut Context<Self>) {
        self.standby_committed = self.standby_committed.max(msg.upto);
        self.release();
    }
}

impl Handler<WriteOut> for Engine {
    fn handle(&mut self, _: WriteOut, ctx: &mut Context<Self>) {
        self.write_scheduled = false;
        if !self.flusher_started {
            // Started with the first batch: a request-reply standby knows its primary by
            // then (`SetPrimary` is sent before any order exists).
            self.flusher_started = true;
            if let Err(e) = self.start_flusher(ctx) {
                self.fail(&e, ctx);
                return;
            }
        }
        // Written and handed to the flusher; acknowledged when `Durable` says so.
        if let Err(e) = self.shard.submit() {
            self.fail(&e, ctx);
        }
    }
}

impl Handler<Durable> for Engine {
    fn handle(&mut self, msg: Durable, _ctx: &mut Context<Self>) {
        // Marks only rise; a flush covers nothing beyond what was applied.
        self.committed = self.committed.max(msg.upto.min(self.shard.applied()));
        self.release();
    }
}

impl Handler<LogFailed> for Engine {
    fn handle(&mut self, LogFailed(e): LogFailed, ctx: &mut Context<Self>) {
        self.fail(&e, ctx);
    }
}

impl Handler<SetPrimary> for Engine {
    fn handle(&mut self, msg: SetPrimary, _ctx: &mut Context<Self>) {
        self.primary = Some(msg.0);
    }
}

impl Handler<GetState> for Engine {
    fn handle(&mut self, _: GetState, _ctx: &mut Context<Self>) -> EngineState {
        self.state()
    }
}

impl Handler<GetAcceptedKeys> for Engine {
    fn handle(&mut self, _: GetAcceptedKeys, _ctx: &mut Context<Self>) -> Vec<OrderKey> {
        self.shard.accepted_keys()
    }
}

impl Handler<SyncLog> for Engine {
    fn handle(&mut self, _: SyncLog, _ctx: &mut Context<Self>) -> Result<(), String> {
        self.shard.sync().map_err(|e| e.to_string())
    }
}

//! The wire format: frames of entries, each entry one message, one request or one reply.
//!
//! ```text
//! frame   = "TR" version:u8 kind:u8 body
//! kind 1  Batch:    count:u32le entry*count          (published to troupe.<name> or a reply subject)
//! kind 2  Where:    (empty)                           (a NATS request: who exports this name?)
//! kind 3  Here:     heartbeat_ms:u32le node-id:utf8   (the answer to Where)
//! kind 4  Down:     code:u8 reason:utf8               (published to troupe.down.<name>)
//! kind 5  Refused:  code:u8 subject-len:u16le subject detail:utf8
//!                   (sent back to a frame's reply subject when the whole frame is refused;
//!                   this layout is the same in every version, so a mismatched peer reads it)
//! entry   = 1 Tell        tag payload
//!         | 2 Ask         id:u64le tag payload
//!         | 3 Ok          id:u64le payload
//!         | 4 Err         id:u64le code:u8 detail-len:u16le detail
//!         | 5 TracedTell  trace tag payload              (version 2 on)
//!         | 6 TracedAsk   id:u64le trace tag payload     (version 2 on)
//! tag     = name-len:u8 name:utf8 type-version:u16le
//! payload = len:u32le bytes (postcard)
//! trace   = len:u16le field*                             (len bytes of fields in all)
//! field   = key-len:u8 key:utf8 value-len:u16le value:utf8
//! ```
//!
//! Every length is checked against what is left before it is used: a truncated or hostile
//! frame is refused with a [`Refusal`], never read past its end. A batch's count is checked
//! against the receiver's `max_frame_entries` before any entry is read, so what one frame can
//! make a node do is bounded by that count, whatever the frame's size.
//!
//! # Versions
//!
//! Version 2 adds the traced entries: a tell or an ask with the trace context of the span it
//! was sent from, as the W3C trace context's text fields (`traceparent`, and `tracestate` when
//! there is one), at most [`MAX_TRACE_BYTES`] of them. A node reads versions
//! [`MIN_WIRE_VERSION`] to [`WIRE_VERSION`], and writes each frame at the oldest version whose
//! layout it uses: a frame without a traced entry is a version 1 frame, byte for byte what a
//! node of version 1 writes and reads, and a batch is raised to version 2 by its first traced
//! entry. A message sent from no span (or by a node built without the `otel` feature) costs
//! nothing: it is the untraced entry it always was. So nodes of both versions talk as long as
//! nothing is traced; a traced message to a node of version 1 is refused there with
//! [`RefusalKind::WireVersion`] (upgrade receivers before senders trace).
//!
//! A trace field that is well framed but says nothing readable (fields that are not UTF-8, no
//! valid `traceparent`, more than [`MAX_TRACE_BYTES`]) does not refuse its entry: the message is
//! delivered without a parent span, and the receiving node counts it
//! ([`crate::NodeStats::traces_ignored`]).

use std::fmt;
use std::ops::RangeInclusive;

use serde::de::DeserializeOwned;
use serde::Serialize;
use troupe::Message;

/// The first two bytes of every frame.
pub const MAGIC: [u8; 2] = *b"TR";
/// The newest frame layout a node speaks. A node reads frames of versions
/// [`MIN_WIRE_VERSION`] ..= this one, refuses any other with [`RefusalKind::WireVersion`] and
/// says so to the sender.
pub const WIRE_VERSION: u8 = 2;
/// The oldest frame layout a node reads, and the one it writes every frame in that needs
/// nothing newer.
pub const MIN_WIRE_VERSION: u8 = 1;
/// The version that brought the traced entries (`TracedTell`, `TracedAsk`).
pub const TRACE_VERSION: u8 = 2;
/// The most bytes the fields of one trace field may take: a `traceparent` (55 bytes) and a
/// `tracestate` of the W3C's largest (512 bytes) fit with their keys. A sender leaves out a
/// field that would not fit; a receiver ignores a larger trace.
pub const MAX_TRACE_BYTES: usize = 1024;

/// A message that may cross processes: a serde type with a name and a version that both ends
/// agree on. Its reply must be serde too.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use troupe::Message;
/// use troupe_remote::RemoteMessage;
///
/// #[derive(Message, Serialize, Deserialize)]
/// #[reply(u64)]
/// struct Deposit { account: u32, cents: u64 }
///
/// impl RemoteMessage for Deposit {
///     const NAME: &'static str = "bank.deposit";
///     // Bump when the layout changes: an old peer then gets a clear error, never garbage.
///     const VERSION: u16 = 1;
/// }
/// ```
pub trait RemoteMessage:
    Message<Reply: Serialize + DeserializeOwned + Send> + Serialize + DeserializeOwned
{
    /// The name both ends know the type by (at most 255 bytes).
    const NAME: &'static str;
    /// The layout's version; entries of another version are refused with
    /// [`RefusalKind::TypeVersion`].
    const VERSION: u16 = 1;
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum Kind {
    Batch = 1,
    Where = 2,
    Here = 3,
    Down = 4,
    Refused = 5,
}

pub(crate) const ENTRY_TELL: u8 = 1;
pub(crate) const ENTRY_ASK: u8 = 2;
pub(crate) const ENTRY_OK: u8 = 3;
pub(crate) const ENTRY_ERR: u8 = 4;
pub(crate) const ENTRY_TRACED_TELL: u8 = 5;
pub(crate) const ENTRY_TRACED_ASK: u8 = 6;

/// Why a frame or an entry was refused. Counted by the receiving node ([`crate::NodeStats`])
/// and, for requests, sent back to the asker.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[non_exhaustive]
pub enum RefusalKind {
    /// The frame ended before a length it announced.
    Truncated,
    /// Not a troupe frame (wrong magic bytes, unknown frame or entry kind).
    Malformed,
    /// A frame layout version this node does not speak.
    WireVersion,
    /// A message type the exported actor does not accept.
    UnknownType,
    /// A known message type, at another version than this node's.
    TypeVersion,
    /// The payload did not decode as the named type.
    Decode,
    /// The frame or payload is larger than the node accepts, or the frame holds more entries.
    Oversized,
    /// The node already works on as many asks as it takes (from this sender, or from all): the
    /// ask was not handled. Asking again later may succeed.
    Overloaded,
}

impl RefusalKind {
    pub(crate) const ALL: [RefusalKind; 8] = [
        RefusalKind::Truncated,
        RefusalKind::Malformed,
        RefusalKind::WireVersion,
        RefusalKind::UnknownType,
        RefusalKind::TypeVersion,
        RefusalKind::Decode,
        RefusalKind::Oversized,
        RefusalKind::Overloaded,
    ];

    pub(crate) fn code(self) -> u8 {
        match self {
            RefusalKind::Truncated => 1,
            RefusalKind::Malformed => 2,
            RefusalKind::WireVersion => 3,
            RefusalKind::UnknownType => 4,
            RefusalKind::TypeVersion => 5,
            RefusalKind::Decode => 6,
            RefusalKind::Oversized => 7,
            RefusalKind::Overloaded => 8,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }

    pub(crate) fn index(self) -> usize {
        self.code() as usize - 1
    }
}

impl fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RefusalKind::Truncated => "truncated frame",
            RefusalKind::Malformed => "not a troupe frame",
            RefusalKind::WireVersion => "wire version mismatch",
            RefusalKind::UnknownType => "unknown message type",
            RefusalKind::TypeVersion => "message type version mismatch",
            RefusalKind::Decode => "payload does not decode",
            RefusalKind::Oversized => "oversized",
            RefusalKind::Overloaded => "overloaded",
        })
    }
}

/// A refusal with what the refusing side saw.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Refusal {
    pub kind: RefusalKind,
    pub detail: String,
}

impl Refusal {
    pub(crate) fn new(kind: RefusalKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.detail)
    }
}

/// Codes of an `Err` entry: the far actor's own failure, or a refusal.
pub(crate) mod code {
    pub(crate) const STOPPED: u8 = 101;
    pub(crate) const PANICKED: u8 = 102;
    pub(crate) const MAILBOX_FULL: u8 = 103;
    pub(crate) const DROPPED: u8 = 104;
    pub(crate) const NO_REPLY: u8 = 105;
    pub(crate) const TIMED_OUT: u8 = 106;
}

/// Codes of a `Down` frame.
pub(crate) mod down {
    pub(crate) const STOPPED: u8 = 1;
    pub(crate) const FAILED: u8 = 2;
    pub(crate) const UNEXPORTED: u8 = 3;
}

/// Writes a frame header.
pub(crate) fn header(buf: &mut Vec<u8>, version: u8, kind: Kind) {
    buf.extend_from_slice(&MAGIC);
    buf.push(version);
    buf.push(kind as u8);
}

/// Starts a batch frame; its count is patched by [`finish_batch`].
pub(crate) fn start_batch(buf: &mut Vec<u8>, version: u8) {
    header(buf, version, Kind::Batch);
    buf.extend_from_slice(&0u32.to_le_bytes());
}

pub(crate) const BATCH_HEADER: usize = 8;

pub(crate) fn finish_batch(buf: &mut [u8], count: u32) {
    buf[4..8].copy_from_slice(&count.to_le_bytes());
}

/// Raises the version of the frame begun in `buf` to at least `version` (an entry of a newer
/// layout was added to it).
pub(crate) fn raise_version(buf: &mut [u8], version: u8) {
    if buf[2] < version {
        buf[2] = version;
    }
}

/// Appends a trace field holding `fields` (made with [`put_trace_field`]).
pub(crate) fn put_trace(buf: &mut Vec<u8>, fields: &[u8]) {
    debug_assert!(fields.len() <= MAX_TRACE_BYTES);
    buf.extend_from_slice(&(fields.len() as u16).to_le_bytes());
    buf.extend_from_slice(fields);
}

/// Appends one key and value to the fields of a trace field. Returns false, and appends
/// nothing, if they would take the fields past [`MAX_TRACE_BYTES`] (or the key past 255 bytes).
pub fn put_trace_field(fields: &mut Vec<u8>, key: &str, value: &str) -> bool {
    let size = 1 + key.len() + 2 + value.len();
    if key.len() > u8::MAX as usize || fields.len() + size > MAX_TRACE_BYTES {
        return false;
    }
    fields.push(key.len() as u8);
    fields.extend_from_slice(key.as_bytes());
    fields.extend_from_slice(&(value.len() as u16).to_le_bytes());
    fields.extend_from_slice(value.as_bytes());
    true
}

/// The keys and values in the fields of a trace field, or what is wrong with them. Never
/// reads past their end.
pub fn trace_fields(fields: &[u8]) -> Result<Vec<(&str, &str)>, String> {
    if fields.len() > MAX_TRACE_BYTES {
        return Err(format!(
            "a trace of {} bytes, over the limit of {MAX_TRACE_BYTES}",
            fields.len()
        ));
    }
    fn text(bytes: &[u8]) -> Result<&str, String> {
        std::str::from_utf8(bytes).map_err(|_| "a trace field is not UTF-8".to_string())
    }
    let mut reader = Reader { rest: fields };
    let mut found = Vec::new();
    while !reader.rest.is_empty() {
        let key_len = reader.u8("trace key length").map_err(|r| r.detail)? as usize;
        let key = text(reader.bytes(key_len, "trace key").map_err(|r| r.detail)?)?;
        let value_len = reader.u16("trace value length").map_err(|r| r.detail)? as usize;
        let value = text(
            reader
                .bytes(value_len, "trace value")
                .map_err(|r| r.detail)?,
        )?;
        found.push((key, value));
    }
    Ok(found)
}

pub(crate) fn put_tag(buf: &mut Vec<u8>, name: &str, version: u16) {
    debug_assert!(name.len() <= u8::MAX as usize);
    buf.push(name.len() as u8);
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(&version.to_le_bytes());
}

/// Appends `value` to `buf`, encoded with postcard.
///
/// Values up to 64 bytes (most messages) are encoded into a stack buffer and copied in one
/// go: postcard's `Vec` flavor extends the vector byte by byte, and an order-sized message took
/// 47 ns that way against 28 ns this way (`troupe-bench remote`, encode_ns). A larger value
/// pays for the failed attempt, then takes the `Vec` way.
pub fn encode_into<T: Serialize>(buf: &mut Vec<u8>, value: &T) -> Result<(), postcard::Error> {
    let mut stack = [0u8; 64];
    match postcard::to_slice(value, &mut stack) {
        Ok(used) => {
            buf.extend_from_slice(used);
            Ok(())
        }
        Err(postcard::Error::SerializeBufferFull) => {
            *buf = postcard::to_extend(value, std::mem::take(buf))?;
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Appends `value` as a length-prefixed postcard payload.
pub(crate) fn put_payload<T: Serialize>(
    buf: &mut Vec<u8>,
    value: &T,
) -> Result<(), postcard::Error> {
    let at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    encode_into(buf, value)?;
    let len = (buf.len() - at - 4) as u32;
    buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
    Ok(())
}

pub(crate) fn put_err(buf: &mut Vec<u8>, id: u64, code: u8, detail: &str) {
    buf.push(ENTRY_ERR);
    buf.extend_from_slice(&id.to_le_bytes());
    buf.push(code);
    let detail = &detail.as_bytes()[..detail.len().min(u16::MAX as usize)];
    buf.extend_from_slice(&(detail.len() as u16).to_le_bytes());
    buf.extend_from_slice(detail);
}

/// A frame's header, checked.
pub(crate) struct Frame<'a> {
    pub(crate) version: u8,
    pub(crate) kind: Kind,
    pub(crate) body: Reader<'a>,
}

/// Checks the magic, version (one of `reads`) and kind of a frame.
pub(crate) fn open(bytes: &[u8], reads: RangeInclusive<u8>) -> Result<Frame<'_>, Refusal> {
    if bytes.len() < 4 {
        return Err(Refusal::new(
            RefusalKind::Truncated,
            format!("{} bytes, shorter than a frame header", bytes.len()),
        ));
    }
    if bytes[..2] != MAGIC {
        return Err(Refusal::new(
            RefusalKind::Malformed,
            "the frame does not start with the troupe magic bytes",
        ));
    }
    // A Refused frame has the same layout in every version, so that a peer speaking another
    // version can read why it was refused.
    if !reads.contains(&bytes[2]) && bytes[3] != Kind::Refused as u8 {
        let speaks = if reads.start() == reads.end() {
            format!("version {}", reads.start())
        } else {
            format!("versions {} to {}", reads.start(), reads.end())
        };
        return Err(Refusal::new(
            RefusalKind::WireVersion,
            format!(
                "the frame has wire version {}, this node speaks {speaks}",
                bytes[2]
            ),
        ));
    }
    let kind = match bytes[3] {
        1 => Kind::Batch,
        2 => Kind::Where,
        3 => Kind::Here,
        4 => Kind::Down,
        5 => Kind::Refused,
        other => {
            return Err(Refusal::new(
                RefusalKind::Malformed,
                format!("unknown frame kind {other}"),
            ))
        }
    };
    Ok(Frame {
        version: bytes[2],
        kind,
        body: Reader { rest: &bytes[4..] },
    })
}

/// Reads a frame's body, checking every length against what is left.
pub(crate) struct Reader<'a> {
    pub(crate) rest: &'a [u8],
}

impl<'a> Reader<'a> {
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub(crate) fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], Refusal> {
        if self.rest.len() < n {
            return Err(Refusal::new(
                RefusalKind::Truncated,
                format!("{what}: needs {n} bytes, {} left", self.rest.len()),
            ));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, Refusal> {
        Ok(self.bytes(1, what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, Refusal> {
        let b = self.bytes(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, Refusal> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_le_bytes(b.try_into().expect("four bytes")))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, Refusal> {
        let b = self.bytes(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().expect("eight bytes")))
    }

    /// The rest as text (lossy: a detail string is for people).
    pub(crate) fn text(&mut self) -> String {
        let text = String::from_utf8_lossy(self.rest).into_owned();
        self.rest = &[];
        text
    }

    pub(crate) fn tag(&mut self) -> Result<(&'a str, u16), Refusal> {
        let len = self.u8("tag length")? as usize;
        let name = self.bytes(len, "tag name")?;
        let name = std::str::from_utf8(name)
            .map_err(|_| Refusal::new(RefusalKind::Malformed, "a type name is not UTF-8"))?;
        let version = self.u16("tag version")?;
        Ok((name, version))
    }

    pub(crate) fn payload(&mut self, limit: usize) -> Result<&'a [u8], Refusal> {
        let len = self.u32("payload length")? as usize;
        if len > limit {
            return Err(Refusal::new(
                RefusalKind::Oversized,
                format!("a payload of {len} bytes, over the limit of {limit}"),
            ));
        }
        self.bytes(len, "payload")
    }

    /// A trace field: its fields, unread (see [`trace_fields`]).
    pub(crate) fn trace(&mut self) -> Result<&'a [u8], Refusal> {
        let len = self.u16("trace length")? as usize;
        self.bytes(len, "trace")
    }

    pub(crate) fn short_text(&mut self, what: &str) -> Result<String, Refusal> {
        let len = self.u16(what)? as usize;
        Ok(String::from_utf8_lossy(self.bytes(len, what)?).into_owned())
    }
}

/// Decodes a payload as `T`.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, Refusal> {
    postcard::from_bytes(bytes)
        .map_err(|e| Refusal::new(RefusalKind::Decode, format!("{what}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_round_trips_and_truncation_is_refused() {
        let mut buf = Vec::new();
        start_batch(&mut buf, WIRE_VERSION);
        buf.push(ENTRY_TELL);
        put_tag(&mut buf, "t", 3);
        put_payload(&mut buf, &(7u32, String::from("seven"))).unwrap();
        finish_batch(&mut buf, 1);
        let mut frame = open(&buf, MIN_WIRE_VERSION..=WIRE_VERSION).unwrap();
        assert_eq!(frame.kind, Kind::Batch);
        assert_eq!(frame.body.u32("count").unwrap(), 1);
        assert_eq!(frame.body.u8("entry").unwrap(), ENTRY_TELL);
        assert_eq!(frame.body.tag().unwrap(), ("t", 3));
        let payload = frame.body.payload(1 << 20).unwrap();
        let value: (u32, String) = decode(payload, "test").unwrap();
        assert_eq!(value, (7, "seven".to_string()));
        assert!(frame.body.is_empty());

        // Every prefix of the frame is refused as truncated or malformed, never read past.
        for cut in 0..buf.len() {
            let Ok(mut frame) = open(&buf[..cut], MIN_WIRE_VERSION..=WIRE_VERSION) else {
                continue;
            };
            let walk = (|| -> Result<(), Refusal> {
                frame.body.u32("count")?;
                frame.body.u8("entry")?;
                frame.body.tag()?;
                let p = frame.body.payload(1 << 20)?;
                decode::<(u32, String)>(p, "test")?;
                Ok(())
            })();
            assert!(walk.is_err(), "a frame cut at {cut} was accepted");
        }
    }

    #[test]
    fn other_versions_and_oversized_payloads_are_refused() {
        let mut buf = Vec::new();
        start_batch(&mut buf, 9);
        let Err(refusal) = open(&buf, MIN_WIRE_VERSION..=WIRE_VERSION) else {
            panic!("version 9 accepted")
        };
        assert_eq!(refusal.kind, RefusalKind::WireVersion);
        let mut big = Vec::new();
        put_payload(&mut big, &vec![1u8; 100]).unwrap();
        let mut reader = Reader { rest: &big };
        assert_eq!(reader.payload(10).unwrap_err().kind, RefusalKind::Oversized);
        assert!(open(b"XX\x01\x01", MIN_WIRE_VERSION..=WIRE_VERSION).is_err());
        assert!(open(b"TR\x01\x09", MIN_WIRE_VERSION..=WIRE_VERSION).is_err());
    }

    #[test]
    fn a_version_1_frame_still_reads_and_a_traced_entry_raises_its_frame_to_version_2() {
        // A version 1 batch as a node of that version writes it, byte for byte.
        let mut old = b"TR\x01\x01\x01\x00\x00\x00\x01\x01t\x03\x00".to_vec();
        put_payload(&mut old, &7u32).unwrap();
        let mut frame = open(&old, MIN_WIRE_VERSION..=WIRE_VERSION).unwrap();
        assert_eq!((frame.version, frame.kind), (1, Kind::Batch));
        assert_eq!(frame.body.u32("count").unwrap(), 1);
        assert_eq!(frame.body.u8("entry").unwrap(), ENTRY_TELL);
        assert_eq!(frame.body.tag().unwrap(), ("t", 3));
        assert_eq!(decode::<u32>(frame.body.payload(64).unwrap(), "t"), Ok(7));

        // A batch begins at version 1 and its first traced entry raises it.
        let mut fields = Vec::new();
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        assert!(put_trace_field(&mut fields, "traceparent", parent));
        assert!(put_trace_field(&mut fields, "tracestate", "k=v"));
        let mut buf = Vec::new();
        start_batch(&mut buf, MIN_WIRE_VERSION);
        buf.push(ENTRY_TRACED_ASK);
        buf.extend_from_slice(&9u64.to_le_bytes());
        put_trace(&mut buf, &fields);
        put_tag(&mut buf, "t", 1);
        put_payload(&mut buf, &7u32).unwrap();
        raise_version(&mut buf, TRACE_VERSION);
        raise_version(&mut buf, MIN_WIRE_VERSION); // never lowers it
        finish_batch(&mut buf, 1);
        let mut frame = open(&buf, MIN_WIRE_VERSION..=WIRE_VERSION).unwrap();
        assert_eq!(frame.version, TRACE_VERSION);
        assert_eq!(frame.body.u32("count").unwrap(), 1);
        assert_eq!(frame.body.u8("entry").unwrap(), ENTRY_TRACED_ASK);
        assert_eq!(frame.body.u64("id").unwrap(), 9);
        let trace = frame.body.trace().unwrap();
        assert_eq!(
            trace_fields(trace).unwrap(),
            [("traceparent", parent), ("tracestate", "k=v")]
        );
        assert_eq!(frame.body.tag().unwrap(), ("t", 1));
        assert_eq!(decode::<u32>(frame.body.payload(64).unwrap(), "t"), Ok(7));
        assert!(frame.body.is_empty());
        // A node of version 1 refuses it as a whole, and can say why.
        assert_eq!(
            open(&buf, 1..=1).err().map(|r| r.kind),
            Some(RefusalKind::WireVersion)
        );

        // Cut anywhere, the traced entry is refused, never read past.
        for cut in 8..buf.len() {
            let mut frame = open(&buf[..cut], MIN_WIRE_VERSION..=WIRE_VERSION).unwrap();
            let walk = (|| -> Result<(), Refusal> {
                frame.body.u32("count")?;
                frame.body.u8("entry")?;
                frame.body.u64("id")?;
                frame.body.trace()?;
                frame.body.tag()?;
                frame.body.payload(64)?;
                Ok(())
            })();
            assert!(walk.is_err(), "a frame cut at {cut} was accepted");
        }
    }

    #[test]
    fn trace_fields_that_do_not_read_are_said_so_never_read_past() {
        assert_eq!(trace_fields(&[]), Ok(vec![]));
        assert!(trace_fields(&[5, b'a']).is_err()); // a key longer than what is left
        assert!(trace_fields(&[1, b'a', 9, 0, b'x']).is_err()); // so is the value
        assert!(trace_fields(&[1, 0xff, 0, 0]).is_err()); // not UTF-8
        assert!(trace_fields(&[0; MAX_TRACE_BYTES + 1]).is_err());
        // What does not fit is left out whole.
        let mut fields = Vec::new();
        assert!(!put_trace_field(
            &mut fields,
            "k",
            &"v".repeat(MAX_TRACE_BYTES)
        ));
        assert!(!put_trace_field(&mut fields, &"k".repeat(256), "v"));
        assert!(fields.is_empty());
        // Any bytes at all: an answer, never a panic.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 24) as usize;
            let bytes: Vec<u8> = (0..len).map(|i| (seed >> (i % 8 * 8)) as u8 % 8).collect();
            let _ = trace_fields(&bytes);
        }
    }
}

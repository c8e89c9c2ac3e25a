//! Appending to a file through a shared memory mapping: the log's `buffered` mode.
//!
//! A store into a `MAP_SHARED` file mapping lands in the kernel's page cache at once, exactly
//! where a `write(2)` would have put it: it survives a crash of the process (even `kill -9`),
//! not a crash of the machine. That is the `buffered` promise, and it costs a `memcpy` per
//! record instead of a system call per batch.
//!
//! The file is mapped one [`CHUNK`] at a time. When a chunk is full the file is extended by
//! one chunk (`ftruncate`, which allocates nothing on disk until pages are written) and the
//! next chunk is mapped; a record may straddle two chunks. The unwritten rest of the last
//! chunk reads as zeros: the log reader treats a zero length field followed by nothing but
//! zeros as the clean end of the log. Dropping the appender trims that zero tail, so a clean
//! stop leaves a file of exactly its records; after a crash, recovery trims it.
//!
//! Invariant: `map`, when it is `Some`, points to `CHUNK` bytes mapped read-write and shared
//! from the file at offset `map_offset`, and the file is at least `map_offset + CHUNK` long.
//! It is `None` only after a cut ([`MappedAppender::cut_back`]) failed between dropping the old
//! mapping and making the new one; every later append and sync then fails. Nothing else in the
//! program truncates the file meanwhile (another process doing so would make a store fault: do
//! not edit live logs).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::{self, NonNull};

/// Bytes mapped at a time (a multiple of every page size in use).
pub(crate) const CHUNK: u64 = 8 << 20;

/// An append cursor over a memory-mapped file. See the module note.
#[derive(Debug)]
pub(crate) struct MappedAppender {
    file: File,
    /// The live mapping (see the module invariant).
    map: Option<NonNull<u8>>,
    map_offset: u64,
    /// File offset of the next byte to write.
    pos: u64,
}

// SAFETY: the mapping is owned by this value alone (no other pointer to it escapes), so moving
// the appender to another thread moves sole access with it.
unsafe impl Send for MappedAppender {}

impl MappedAppender {
    /// Starts appending at file offset `pos` (the end of the good records).
    pub(crate) fn new(file: File, pos: u64) -> io::Result<Self> {
        let map_offset = pos / CHUNK * CHUNK;
        let map = map_chunk(&file, map_offset)?;
        Ok(MappedAppender {
            file,
            map: Some(map),
            map_offset,
            pos,
        })
    }

    /// Copies `bytes` to the end of the file.
    #[inline]
    pub(crate) fn append(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let map = self.live()?;
            let in_chunk = (self.pos - self.map_offset) as usize;
            let room = CHUNK as usize - in_chunk;
            if room == 0 {
                self.next_chunk()?;
                continue;
            }
            let n = room.min(bytes.len());
            // SAFETY: `in_chunk + n <= CHUNK`, so the destination lies inside the live mapping
            // (module invariant); the source is a distinct Rust slice, so they cannot overlap.
            unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), map.as_ptr().add(in_chunk), n) };
            self.pos += n as u64;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    fn live(&self) -> io::Result<NonNull<u8>> {
        self.map
            .ok_or_else(|| io::Error::other("the log's mapping was lost by a failed cut"))
    }

    fn next_chunk(&mut self) -> io::Result<()> {
        let next = self.map_offset + CHUNK;
        let map = map_chunk(&self.file, next)?;
        self.unmap();
        self.map = Some(map);
        self.map_offset = next;
        Ok(())
    }

    /// Drops the live mapping, if any.
    fn unmap(&mut self) {
        if let Some(map) = self.map.take() {
            // SAFETY: the mapping came from `map_chunk` with length CHUNK, and it is taken out
            // of `self`, so nothing uses it after this.
            unsafe { libc::munmap(map.as_ptr().cast(), CHUNK as usize) };
        }
    }

    /// Cuts the file back to `pos` bytes (at most the current end) and appends from there.
    /// The live mapping is dropped first (no store can reach bytes past the new end), the file
    /// shortened, and the chunk holding `pos` mapped again; what followed `pos` reads as
    /// zeros, the log's clean end. On an error the appender is left without a mapping and
    /// every later append fails.
    pub(crate) fn cut_back(&mut self, pos: u64) -> io::Result<()> {
        if pos > self.pos {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a cut beyond the end of the log",
            ));
        }
        self.unmap();
        self.file.set_len(pos)?;
        self.pos = pos;
        self.map_offset = pos / CHUNK * CHUNK;
        self.map = Some(map_chunk(&self.file, self.map_offset)?);
        Ok(())
    }

    /// Flushes everything appended so far to the disk.
    pub(crate) fn sync(&mut self) -> io::Result<()> {
        let map = self.live()?;
        // SAFETY: the range is the live mapping (module invariant).
        let r = unsafe { libc::msync(map.as_ptr().cast(), CHUNK as usize, libc::MS_SYNC) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        // Earlier chunks are unmapped but may still be dirty in the page cache.
        self.file.sync_data()
    }
}

impl Drop for MappedAppender {
    fn drop(&mut self) {
        self.unmap();
        // Trim the zero tail; if this fails, the next recovery trims it.
        let _ = self.file.set_len(self.pos);
    }
}

/// Makes the file at least `offset + CHUNK` long and maps that chunk.
fn map_chunk(file: &File, offset: u64) -> io::Result<NonNull<u8>> {
    if file.metadata()?.len() < offset + CHUNK {
        file.set_len(offset + CHUNK)?;
    }
    let offset = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "log file too large to map"))?;
    // SAFETY: a fresh shared mapping of a file range that exists (extended above); the kernel
    // chooses the address. Failure is reported as MAP_FAILED and checked below.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            CHUNK as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            offset,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned null"))
}

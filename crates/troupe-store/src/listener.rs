//! The listening sockets of both stores and the backends, with the accept backlog a deployment
//! sets.
//!
//! `std::net::TcpListener::bind` and `tokio::net::TcpListener::bind` both listen with a backlog
//! of 128 connections that the kernel has completed but the server has not accepted yet. The
//! seed's load opens 900 connections at once; past 128 waiting, the kernel drops the SYNs
//! (`ListenOverflows`) and each of those clients retries a second or more later. A store that
//! accepts slowly (the thread-per-request one starts a thread per connection) then loses for
//! its socket's configuration, not for its design. Every listener here is made with
//! [`BACKLOG`] instead, as a production server configures it (nginx and Apache take the
//! backlog as a setting; Linux caps it at `net.core.somaxconn`, 4,096 by default since 5.4).

use std::io;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};

use socket2::{Domain, Protocol, Socket, Type};

/// Connections the kernel may hold completed, waiting for `accept`: above the seed's 900
/// users connecting at once, and Linux's default ceiling (`net.core.somaxconn`), which caps
/// whatever is asked.
pub const BACKLOG: i32 = 4096;

/// A blocking listener on `addr` with a backlog of [`BACKLOG`] (`SO_REUSEADDR` set, as
/// `std` and tokio set it).
pub fn listen(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
    let mut last = None;
    for addr in addr.to_socket_addrs()? {
        match listen_on(addr) {
            Ok(listener) => return Ok(listener),
            Err(error) => last = Some(error),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "the address names no socket")
    }))
}

/// [`listen`] for tokio: the same socket, non-blocking, registered with the current runtime.
pub fn listen_async(addr: impl ToSocketAddrs) -> io::Result<tokio::net::TcpListener> {
    let listener = listen(addr)?;
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}

fn listen_on(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;
    use std::time::Duration;

    /// Nothing accepts: with the default backlog of 128, the kernel would drop the SYNs past
    /// about 129 and these connects would time out.
    #[test]
    fn a_burst_of_900_connections_waits_in_the_backlog() {
        let listener = listen("127.0.0.1:0").expect("listen");
        let addr = listener.local_addr().expect("its address");
        let connected: Vec<TcpStream> = (0..900)
            .map(|i| {
                TcpStream::connect_timeout(&addr, Duration::from_millis(500))
                    .unwrap_or_else(|e| panic!("connection {i} was not completed: {e}"))
            })
            .collect();
        assert_eq!(connected.len(), 900);
    }

    #[test]
    fn an_unresolvable_address_is_an_error() {
        assert!(listen("256.0.0.1:0").is_err());
    }
}

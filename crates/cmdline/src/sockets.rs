//! Small socket traits implemented by both the kernel's `std::net` sockets and corestack's, so
//! one echo loop, one ping-pong client and one netcat drive either stack; and the kernel
//! socket's congestion control.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};

use anyhow::{Context, Result};

/// Sets TCP_CONGESTION on a kernel socket (on a listener: for the connections it accepts).
pub fn set_kernel_cc<S: std::os::fd::AsFd>(s: &S, name: &str) -> Result<()> {
    socket2::SockRef::from(s)
        .set_tcp_congestion(name.as_bytes())
        .with_context(|| {
            format!("setting TCP congestion control {name} (see /proc/sys/net/ipv4/tcp_available_congestion_control)")
        })
}

/// A byte stream either stack provides.
pub trait Stream: Read + Write {
    /// Half-closes the sending side (FIN).
    fn shutdown_write(&mut self) -> io::Result<()>;
    /// Switches between blocking and nonblocking (EWOULDBLOCK) reads and writes.
    fn nonblocking(&mut self, on: bool) -> io::Result<()>;
    /// Disables Nagle.
    fn nodelay(&mut self) -> io::Result<()>;
}

impl Stream for std::net::TcpStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        std::net::TcpStream::shutdown(self, Shutdown::Write)
    }
    fn nonblocking(&mut self, on: bool) -> io::Result<()> {
        std::net::TcpStream::set_nonblocking(self, on)
    }
    fn nodelay(&mut self) -> io::Result<()> {
        std::net::TcpStream::set_nodelay(self, true)
    }
}

impl Stream for corestack::TcpStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        corestack::TcpStream::shutdown(self, Shutdown::Write)
    }
    fn nonblocking(&mut self, on: bool) -> io::Result<()> {
        corestack::TcpStream::set_nonblocking(self, on)
    }
    fn nodelay(&mut self) -> io::Result<()> {
        corestack::TcpStream::set_nodelay(self, true)
    }
}

/// A listening TCP socket either stack provides.
pub trait Listener {
    /// The accepted stream type.
    type Stream: Stream;
    /// Accepts one connection (EWOULDBLOCK when nonblocking and none is
    /// pending); the peer is IPv4 or IPv6.
    fn accept_one(&mut self) -> io::Result<(Self::Stream, SocketAddr)>;
    /// Switches between blocking and nonblocking (EWOULDBLOCK) accepts.
    fn nonblocking(&mut self, on: bool) -> io::Result<()>;
}

impl Listener for std::net::TcpListener {
    type Stream = std::net::TcpStream;
    fn accept_one(&mut self) -> io::Result<(std::net::TcpStream, SocketAddr)> {
        self.accept()
    }
    fn nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.set_nonblocking(on)
    }
}

impl Listener for corestack::TcpListener {
    type Stream = corestack::TcpStream;
    fn accept_one(&mut self) -> io::Result<(corestack::TcpStream, SocketAddr)> {
        self.accept()
    }
    fn nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.set_nonblocking(on)
    }
}

/// A UDP socket either stack provides.
pub trait Datagram {
    /// Sends one datagram to `to` (IPv4 or IPv6); returns the bytes sent.
    fn send_one(&mut self, buf: &[u8], to: SocketAddr) -> io::Result<usize>;
    /// Receives one datagram (EWOULDBLOCK when nonblocking and none is queued).
    fn recv_one(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)>;
}

impl Datagram for std::net::UdpSocket {
    fn send_one(&mut self, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
        self.send_to(buf, to)
    }
    fn recv_one(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.recv_from(buf)
    }
}

impl Datagram for corestack::UdpSocket {
    fn send_one(&mut self, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
        self.send_to(buf, to)
    }
    fn recv_one(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.recv_from(buf)
    }
}

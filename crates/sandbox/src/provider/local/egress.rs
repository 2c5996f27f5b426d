//! The sandbox's one way out (#34): with a filtered network policy the
//! sandbox has a network namespace of its own (only `lo`), and its init
//! opens a TCP listener on `127.0.0.1:`[`PORT`] there and hands it to rfs
//! over a socket pair. rfs's egress proxy ([`crate::network::proxy`])
//! accepts on it from outside: the sandbox reaches the proxy at
//! `127.0.0.1:3128`, and nothing else.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The port of the proxy inside a sandbox's network namespace.
pub(crate) const PORT: u16 = crate::network::PROXY_PORT;

/// The proxy variables of every command in a sandbox behind the proxy.
pub(super) fn proxy_env() -> Vec<(String, String)> {
    crate::network::proxy_env()
}

/// A socket pair: (rfs's end, the init's end), both close-on-exec.
pub(super) fn channel() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: socketpair fills two descriptors we then own.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors nobody else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// In the sandbox's init, after its namespaces are set up: listen on
/// `127.0.0.1:PORT` and send the listener over `chan`. Only system
/// calls (runs in a forked child). Returns the errno on failure.
pub(super) unsafe fn listen_and_send(chan: RawFd) -> Result<(), i32> {
    let err = || super::errors::errno();
    let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
    if s < 0 {
        return Err(err());
    }
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: PORT.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    if libc::bind(s, (&addr as *const libc::sockaddr_in).cast(), len) != 0
        || libc::listen(s, 1024) != 0
    {
        return Err(err());
    }
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut space = [0u8; 64];
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
    let cmsg = libc::CMSG_FIRSTHDR(&msg);
    (*cmsg).cmsg_level = libc::SOL_SOCKET;
    (*cmsg).cmsg_type = libc::SCM_RIGHTS;
    (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), s);
    let sent = libc::sendmsg(chan, &msg, 0);
    libc::close(s);
    libc::close(chan);
    if sent < 0 {
        return Err(err());
    }
    Ok(())
}

/// rfs's side: the listener the init sent over `chan`.
pub(super) fn receive(chan: &OwnedFd) -> std::io::Result<std::net::TcpListener> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut space = [0u8; 64];
    // SAFETY: a plain recvmsg into buffers we own; the descriptor it
    // carries becomes ours.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = space.len() as _;
        if libc::recvmsg(chan.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(std::io::Error::other("the sandbox's init sent no listener"));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
        Ok(std::net::TcpListener::from_raw_fd(fd))
    }
}

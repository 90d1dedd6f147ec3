// Whether an HTTP client is still connected, for a handler that waits long
// before it writes anything (a non-streaming generation: without this, a
// chat whose client left generates to the end of its context). cpp-httplib
// 0.11 gives a handler the peer's address and port but not the socket, so
// the socket is found once among the process's descriptors (/proc/self/fd)
// by the peer's address and port and the server's local port, then polled
// without blocking. Linux only; elsewhere no socket is found and the
// request runs to its end, as before.
// Thread-safety: stateless functions.
#pragma once
#include <string>

namespace pc {

// The connected socket with that peer on that local port, or -1.
int FindPeerSocket(const std::string& remote_addr, int remote_port, int local_port);

// True once the peer has closed or reset the connection (a pending request
// body or pipelined bytes do not count).
bool PeerClosed(int fd);

}  // namespace pc

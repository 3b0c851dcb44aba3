/* SCM_RIGHTS over an ordinary AF_UNIX socket (review finding 5): a
 * corestack socket cannot travel to another process, so sendmsg carrying
 * one fails at once with EOPNOTSUPP and sends nothing; a kernel fd still
 * travels; the corestack connection keeps working.
 * With "lend" (service mode) a corestack connection travels: the received
 * fd is the connection, the sender's copy answers ENETDOWN; a listener
 * still cannot travel.
 *
 * usage: scm PEER PORT [lend]   (PEER echoes TCP on PORT; run under the shim)
 * Prints "corestack fd N", then one line per check (PASS/FAIL); exit
 * status 0 when all pass. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"

/* sendmsg of one byte with SCM_RIGHTS carrying fds[0..n]. */
static ssize_t send_fds(int sock, const int *fds, int n) {
    char byte = 'f';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = CMSG_SPACE(n * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    return sendmsg(sock, &m, 0);
}

/* recvmsg of one byte: the first fd received, or -1. */
static int recv_fd(int sock) {
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    if (recvmsg(sock, &m, MSG_DONTWAIT) != 1) return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

/* Service mode: the connection travels; a listener does not. */
static int lend(int c, const struct sockaddr_in *peer) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) return 1;
    ssize_t r = send_fds(sv[0], &c, 1);
    CHECK("sendmsg SCM_RIGHTS of a corestack connection is sent", r == 1, "returned %zd (%s)", r,
          strerror(errno));
    int got = recv_fd(sv[1]);
    CHECK("the fd arrives", got >= 0, "got %d", got);
    char b[16];
    int n = -1;
    if (got >= 0) {
        send(got, "ping", 4, 0);
        struct pollfd p = {.fd = got, .events = POLLIN};
        n = poll(&p, 1, 3000) == 1 ? (int)recv(got, b, sizeof b, 0) : -1;
    }
    CHECK("the received fd is the connection (it echoes)", n == 4 && memcmp(b, "ping", 4) == 0,
          "got %d", n);
    errno = 0;
    r = recv(c, b, sizeof b, MSG_DONTWAIT);
    int e = errno;
    CHECK("the sender's copy answers ENETDOWN", r == -1 && e == ENETDOWN, "returned %zd (%s)", r,
          strerror(e));
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = htons(ntohs(peer->sin_port) + 7000)};
    if (bind(l, (struct sockaddr *)&any, sizeof any) < 0 || listen(l, 4) < 0) return 1;
    printf("corestack fd %d\n", l);
    errno = 0;
    r = send_fds(sv[0], &l, 1);
    e = errno;
    CHECK("sendmsg SCM_RIGHTS of a corestack listener fails with EOPNOTSUPP",
          r == -1 && e == EOPNOTSUPP, "returned %zd (%s)", r, strerror(e));
    printf(failures ? "SOME FAILED\n" : "ALL PASSED\n");
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    int lending = argc == 4 && strcmp(argv[3], "lend") == 0;
    struct sockaddr_in peer = peer_args(lending ? 3 : argc, argv, 3, "scm PEER PORT [lend]");
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *)&peer, sizeof peer) < 0) {
        printf("FAIL connect: %s\n", strerror(errno));
        return 1;
    }
    if (lending) return lend(c, &peer);
    printf("corestack fd %d\n", c);
    int sv[2], pfd[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 || pipe(pfd) < 0) return 1;

    errno = 0;
    ssize_t r = send_fds(sv[0], &c, 1);
    int e = errno;
    CHECK("sendmsg SCM_RIGHTS of a corestack socket fails with EOPNOTSUPP",
          r == -1 && e == EOPNOTSUPP, "returned %zd (%s)", r, strerror(e));

    int both[2] = {pfd[0], c};
    errno = 0;
    r = send_fds(sv[0], both, 2);
    e = errno;
    CHECK("a corestack socket among kernel fds fails the whole sendmsg",
          r == -1 && e == EOPNOTSUPP, "returned %zd (%s)", r, strerror(e));
    char b[16];
    errno = 0;
    r = recv(sv[1], b, sizeof b, MSG_DONTWAIT);
    CHECK("nothing was sent", r == -1 && errno == EAGAIN, "recv returned %zd", r);

    r = send_fds(sv[0], &pfd[0], 1);
    int got = recv_fd(sv[1]);
    CHECK("a kernel fd (a pipe) still travels", r == 1 && got >= 0, "sent %zd, got fd %d", r, got);
    if (got >= 0) {
        (void)!write(pfd[1], "z", 1);
        struct pollfd p = {.fd = got, .events = POLLIN};
        int ok = poll(&p, 1, 2000) == 1 && read(got, b, 1) == 1 && b[0] == 'z';
        CHECK("the received pipe reads", ok, "no byte");
    }

    send(c, "ping", 4, 0);
    struct pollfd p = {.fd = c, .events = POLLIN};
    int n = poll(&p, 1, 3000) == 1 ? (int)recv(c, b, sizeof b, 0) : -1;
    CHECK("the corestack connection still echoes", n == 4 && memcmp(b, "ping", 4) == 0, "got %d", n);

    printf(failures ? "SOME FAILED\n" : "ALL PASSED\n");
    return failures ? 1 : 0;
}

/* splice(2) between a TCP socket and pipes, as HAProxy's `option splice-*`
 * relays (review finding 11: splice was not interposed, so a corestack
 * socket answered EINVAL).
 *
 * usage: splice PEER PORT   (PEER echoes TCP on PORT)
 * 1 MiB goes pipe -> socket with splice, comes back socket -> pipe with
 * splice and is compared; then the error cases. Prints one line per check
 * (PASS/FAIL); exit status 0 when all pass. Passes on the kernel too. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"

#define TOTAL (1 << 20)
#define CHUNK 16384

static unsigned char pattern(size_t i) { return (unsigned char)(i * 131 + (i >> 12)); }

int main(int argc, char **argv) {
    struct sockaddr_in peer = peer_args(argc, argv, 3, "splice PEER PORT");
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (struct sockaddr *)&peer, sizeof peer) < 0) {
        printf("FAIL connect: %s\n", strerror(errno));
        return 1;
    }
    int in[2], out[2];
    if (pipe(in) < 0 || pipe(out) < 0) {
        printf("FAIL pipe: %s\n", strerror(errno));
        return 1;
    }
    static unsigned char buf[CHUNK];
    size_t sent = 0, got = 0, bad_at = (size_t)-1;
    int err = 0;
    while (got < TOTAL && !err) {
        if (sent < TOTAL && sent - got < 4 * CHUNK) {
            size_t n = TOTAL - sent < CHUNK ? TOTAL - sent : CHUNK;
            for (size_t i = 0; i < n; i++) buf[i] = pattern(sent + i);
            if (write(in[1], buf, n) != (ssize_t)n) { err = errno; break; }
            size_t moved = 0;
            while (moved < n) {
                ssize_t m = splice(in[0], NULL, s, NULL, n - moved, 0);
                if (m <= 0) { err = m < 0 ? errno : EIO; break; }
                moved += (size_t)m;
            }
            sent += n;
            continue;
        }
        ssize_t m = splice(s, NULL, out[1], NULL, CHUNK, 0);
        if (m <= 0) { err = m < 0 ? errno : EPIPE; break; }
        ssize_t r = read(out[0], buf, (size_t)m);
        if (r != m) { err = EIO; break; }
        for (ssize_t i = 0; i < r; i++)
            if (buf[i] != pattern(got + (size_t)i) && bad_at == (size_t)-1) bad_at = got + (size_t)i;
        got += (size_t)r;
    }
    CHECK("1 MiB spliced pipe -> socket and back socket -> pipe arrives", !err && got == TOTAL,
          "sent %zu, got %zu: %s", sent, got, strerror(err));
    CHECK("the bytes are the ones sent, in order", bad_at == (size_t)-1, "first difference at %zu",
          bad_at);

    /* The socket's side waits as the socket does: O_NONBLOCK, not SPLICE_F_NONBLOCK. */
    fcntl(s, F_SETFL, O_NONBLOCK);
    ssize_t m = splice(s, NULL, out[1], NULL, CHUNK, SPLICE_F_NONBLOCK);
    CHECK("nothing to read on a nonblocking socket: EAGAIN", m < 0 && errno == EAGAIN,
          "returned %zd (%s)", m, strerror(errno));
    loff_t off = 0;
    m = splice(s, &off, out[1], NULL, CHUNK, SPLICE_F_NONBLOCK);
    CHECK("an offset for the socket: EINVAL", m < 0 && errno == EINVAL, "returned %zd (%s)", m,
          strerror(errno));
    int s2 = socket(AF_INET, SOCK_STREAM, 0);
    m = splice(s, NULL, s2, NULL, CHUNK, SPLICE_F_NONBLOCK);
    CHECK("socket to socket: EINVAL", m < 0 && errno == EINVAL, "returned %zd (%s)", m,
          strerror(errno));

    /* A full pipe with SPLICE_F_NONBLOCK: EAGAIN, and no byte is lost. */
    fcntl(out[1], F_SETFL, O_NONBLOCK);
    size_t filled = 0;
    while (write(out[1], buf, sizeof buf) > 0) filled += sizeof buf;
    while (write(out[1], buf, 1) > 0) filled += 1;
    fcntl(out[1], F_SETFL, 0);
    const char *ping = "ping-after-full-pipe";
    send(s, ping, strlen(ping), 0);
    usleep(100 * 1000);
    m = splice(s, NULL, out[1], NULL, CHUNK, SPLICE_F_NONBLOCK);
    CHECK("into a full pipe with SPLICE_F_NONBLOCK: EAGAIN", m < 0 && errno == EAGAIN,
          "returned %zd (%s)", m, strerror(errno));
    fcntl(s, F_SETFL, 0);
    char echo[64] = {0};
    ssize_t e = recv(s, echo, sizeof echo - 1, 0);
    CHECK("the echo is still there to read", e == (ssize_t)strlen(ping) && !strcmp(echo, ping),
          "got %zd: %s", e, echo);
    printf(failures ? "SOME FAILED\n" : "ALL PASSED\n");
    fflush(stdout);
    return failures ? 1 : 0;
}

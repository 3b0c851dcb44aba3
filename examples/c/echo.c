/*
 * echo: a single-threaded TCP echo server on corestack's C API, serving
 * many connections through one poller (as one would with epoll).
 *
 * Usage: echo PORT
 *   Listens on 0.0.0.0:PORT and echoes every byte back. Prints
 *   "echo: listening on 0.0.0.0:PORT" once ready. Stops on SIGTERM or
 *   SIGINT, or once ECHO_MAX_CONNS connections have closed (when that
 *   variable is set and > 0), then prints
 *   "echo: done: N connections closed, B bytes echoed" and exits 0.
 *   The stack is configured by the environment (see corestack.h):
 *   CORESTACK_SOCKET for a running daemon, or CORESTACK_IFACE and
 *   CORESTACK_IP for an embedded stack.
 *
 * Build (see the Makefile beside this file):
 *   cc -O2 -Iinclude examples/c/echo.c -Ltarget/release -lcorestack \
 *      -Wl,-rpath,$PWD/target/release -o echo
 */
#define _POSIX_C_SOURCE 200809L

#include "corestack.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_BYTES 65536
#define MAX_EVENTS 64
/* The poller's data for the listener; connections use their descriptor. */
#define LISTENER_TOKEN UINT64_MAX

/* One connection: bytes received and not yet echoed are buf[start, end). */
struct conn {
    size_t start, end;
    int eof;           /* the peer sent FIN */
    uint32_t interest; /* what the poller watches for it */
    unsigned char buf[BUF_BYTES];
};

static struct conn **conns; /* indexed by descriptor */
static size_t conns_len;
static unsigned long closed_conns;
static unsigned long long echoed_bytes;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void die(const char *what)
{
    fprintf(stderr, "echo: %s: %s\n", what, cs_last_error());
    exit(1);
}

static void close_conn(int pd, int sd)
{
    cs_poller_ctl(pd, CS_POLL_DEL, sd, 0, 0);
    cs_close(sd);
    free(conns[sd]);
    conns[sd] = NULL;
    closed_conns++;
}

static void accept_all(int pd, int lsd)
{
    for (;;) {
        int sd = cs_accept(lsd, NULL);
        if (sd < 0) {
            if (errno != EAGAIN)
                fprintf(stderr, "echo: accept: %s\n", cs_last_error());
            return;
        }
        if ((size_t)sd >= conns_len) {
            size_t len = (size_t)sd * 2 + 16;
            struct conn **grown = realloc(conns, len * sizeof *conns);
            if (!grown) {
                fprintf(stderr, "echo: out of memory\n");
                cs_close(sd);
                continue;
            }
            memset(grown + conns_len, 0, (len - conns_len) * sizeof *conns);
            conns = grown;
            conns_len = len;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            fprintf(stderr, "echo: out of memory\n");
            cs_close(sd);
            continue;
        }
        c->interest = CS_POLLIN;
        if (cs_set_nonblocking(sd, 1) < 0 || cs_set_nodelay(sd, 1) < 0 ||
            cs_poller_ctl(pd, CS_POLL_ADD, sd, c->interest, (uint64_t)sd) < 0) {
            fprintf(stderr, "echo: new connection: %s\n", cs_last_error());
            free(c);
            cs_close(sd);
            continue;
        }
        conns[sd] = c;
    }
}

/* Moves bytes until the connection would block; closes it when it is done
 * (end of stream and everything echoed) or failed. */
static void serve(int pd, int sd)
{
    struct conn *c = conns[sd];
    for (;;) {
        if (c->start < c->end) {
            ssize_t n = cs_send(sd, c->buf + c->start, c->end - c->start, 0);
            if (n < 0) {
                if (errno == EAGAIN)
                    break;
                close_conn(pd, sd);
                return;
            }
            c->start += (size_t)n;
            echoed_bytes += (unsigned long long)n;
            if (c->start == c->end)
                c->start = c->end = 0;
            continue;
        }
        if (c->eof)
            break;
        ssize_t n = cs_recv(sd, c->buf, BUF_BYTES, 0);
        if (n < 0) {
            if (errno == EAGAIN)
                break;
            close_conn(pd, sd);
            return;
        }
        if (n == 0)
            c->eof = 1;
        c->end = (size_t)n;
    }
    if (c->eof && c->start == c->end) {
        close_conn(pd, sd);
        return;
    }
    /* Wait for room while bytes are pending, else for more bytes. */
    uint32_t want = c->start < c->end ? CS_POLLOUT : CS_POLLIN;
    if (want != c->interest) {
        if (cs_poller_ctl(pd, CS_POLL_MOD, sd, want, (uint64_t)sd) < 0) {
            close_conn(pd, sd);
            return;
        }
        c->interest = want;
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: echo PORT\n");
        return 2;
    }
    char *end;
    long port = strtol(argv[1], &end, 10);
    if (*argv[1] == '\0' || *end != '\0' || port < 0 || port > 65535) {
        fprintf(stderr, "echo: PORT must be 0..65535, not %s\n", argv[1]);
        return 2;
    }
    const char *max_env = getenv("ECHO_MAX_CONNS");
    unsigned long max_conns = max_env ? strtoul(max_env, NULL, 10) : 0;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    if (cs_init() < 0)
        die("cs_init");
    int lsd = cs_socket(CS_SOCK_STREAM);
    if (lsd < 0)
        die("socket");
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons((uint16_t)port);
    if (cs_bind(lsd, &addr) < 0)
        die("bind");
    if (cs_listen(lsd, 128) < 0)
        die("listen");
    if (cs_set_nonblocking(lsd, 1) < 0)
        die("set_nonblocking");
    int pd = cs_poller_create();
    if (pd < 0)
        die("poller_create");
    if (cs_poller_ctl(pd, CS_POLL_ADD, lsd, CS_POLLIN, LISTENER_TOKEN) < 0)
        die("poller_ctl");
    if (cs_getsockname(lsd, &addr) < 0)
        die("getsockname");
    printf("echo: listening on 0.0.0.0:%u\n", (unsigned)ntohs(addr.sin_port));
    fflush(stdout);

    struct cs_event evs[MAX_EVENTS];
    while (!stop && (max_conns == 0 || closed_conns < max_conns)) {
        /* A bounded wait, so that a signal is seen within 100 ms. */
        int n = cs_poller_wait(pd, evs, MAX_EVENTS, 100);
        if (n < 0)
            die("poller_wait");
        for (int i = 0; i < n; i++) {
            if (evs[i].data == LISTENER_TOKEN) {
                accept_all(pd, lsd);
                continue;
            }
            int sd = (int)evs[i].data;
            if ((size_t)sd < conns_len && conns[sd])
                serve(pd, sd);
        }
    }

    unsigned long closed = closed_conns;
    for (size_t sd = 0; sd < conns_len; sd++) {
        if (conns[sd]) {
            cs_close((int)sd);
            free(conns[sd]);
        }
    }
    free(conns);
    cs_poller_close(pd);
    cs_close(lsd);
    cs_fini();
    printf("echo: done: %lu connections closed, %llu bytes echoed\n", closed, echoed_bytes);
    return 0;
}

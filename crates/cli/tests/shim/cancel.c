/* pthread_cancel of a thread blocked in recv on a corestack connection
 * (review finding: it hung). On Linux the blocked recv is a cancellation
 * point: the thread ends and pthread_join returns PTHREAD_CANCELED.
 *
 * usage: cancel PEER PORT   (PEER echoes TCP on PORT; run under the shim)
 * Prints one line per check (PASS/FAIL); exit status 0 when all pass. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static int conn;

static void *blocked(void *arg) {
    (void)arg;
    char b[16];
    recv(conn, b, sizeof b, 0); /* nothing comes: blocks */
    return NULL;
}

int main(int argc, char **argv) {
    struct sockaddr_in peer = peer_args(argc, argv, 3, "cancel PEER PORT");
    conn = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(conn, (struct sockaddr *)&peer, sizeof peer) < 0) {
        printf("FAIL connect: %s\n", strerror(errno));
        return 1;
    }
    pthread_t t;
    pthread_create(&t, NULL, blocked, NULL);
    usleep(200 * 1000);
    pthread_cancel(t);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 3;
    void *ret = NULL;
    int r = pthread_timedjoin_np(t, &ret, &until);
    CHECK("a thread blocked in recv is cancelled", r == 0 && ret == PTHREAD_CANCELED,
          "join %s", r ? strerror(r) : "returned, not cancelled");
    send(conn, "ping", 4, 0);
    char b[16];
    int n = (int)recv(conn, b, sizeof b, 0);
    CHECK("the connection still echoes", n == 4, "got %d", n);
    printf(failures ? "SOME FAILED\n" : "ALL PASSED\n");
    fflush(stdout);
    _exit(failures ? 1 : 0);
}

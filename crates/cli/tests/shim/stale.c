/* A corestack socket closed where the shim cannot see the close (review
 * finding 7): a raw syscall(SYS_close), fclose of an fdopen'd socket,
 * closefrom; and close_range. The next fd the kernel hands out with that
 * number (a pipe, open) must be the new file, not the dead socket.
 *
 * usage: stale PEER PORT   (PEER echoes TCP on PORT; run under the shim)
 * Prints one line per check (PASS/FAIL); exit status 0 when all pass. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int failures;
static struct sockaddr_in peer;

static int conn(void) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *)&peer, sizeof peer) < 0) {
        printf("FAIL connect: %s\n", strerror(errno));
        exit(1);
    }
    return c;
}

/* A pipe made after `how` closed socket `c`: its read end should take
 * c's number, and read what its write end writes (poll, then read). */
static void check_pipe(const char *how, int c) {
    int p[2];
    if (pipe(p) < 0) {
        printf("FAIL %s: pipe: %s\n", how, strerror(errno));
        failures++;
        return;
    }
    int ok = 0;
    char b = 0;
    (void)!write(p[1], "a", 1);
    struct pollfd q = {.fd = p[0], .events = POLLIN};
    int n = poll(&q, 1, 1000);
    if (n == 1) ok = read(p[0], &b, 1) == 1 && b == 'a';
    printf("%s %s: pipe read end fd %d (socket was %d): poll %d, read %s\n", ok ? "PASS" : "FAIL",
           how, p[0], c, n, ok ? "a" : "nothing");
    if (p[0] != c) printf("  (note: the pipe did not reuse the number)\n");
    if (!ok) failures++;
    close(p[0]);
    close(p[1]);
}

/* open(2) after the close: the file at c's number reads as the file. */
static void check_open(const char *how, int c) {
    int f = open("/proc/self/stat", O_RDONLY);
    char b[8] = {0};
    struct pollfd q = {.fd = f, .events = POLLIN};
    int n = poll(&q, 1, 1000);
    ssize_t r = n == 1 ? read(f, b, sizeof b) : -1;
    int ok = f == c && r > 0 && b[0] >= '1' && b[0] <= '9';
    printf("%s %s: open fd %d (socket was %d): poll %d, read %zd\n", ok ? "PASS" : "FAIL", how, f,
           c, n, r);
    if (!ok) failures++;
    close(f);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: stale PEER PORT\n");
        return 2;
    }
    peer = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &peer.sin_addr);

    int c = conn();
    syscall(SYS_close, c);
    check_pipe("syscall(SYS_close)", c);

    c = conn();
    syscall(SYS_close, c);
    check_open("syscall(SYS_close) then open", c);

    c = conn();
    FILE *f = fdopen(c, "r+");
    fclose(f);
    check_pipe("fclose(fdopen())", c);

    /* closefrom closes every fd from c up: c is moved above the engine's
     * own fds (embedded mode: opened when the stack started), which the
     * shim does not protect from closefrom. */
    c = conn();
    if (dup2(c, 200) != 200) printf("FAIL dup2: %s\n", strerror(errno));
    close(c);
    c = 200;
    closefrom(c);
    if (fcntl(c, F_GETFD) != -1) printf("FAIL closefrom left fd %d open\n", c);
    /* A pipe would not get 200: F_DUPFD of a pipe end (the kernel's lowest
     * free number from 200, which the shim does not look at) takes it. */
    int p[2];
    if (pipe(p) < 0) return 1;
    int d = fcntl(p[0], F_DUPFD, c);
    (void)!write(p[1], "a", 1);
    struct pollfd q = {.fd = c, .events = POLLIN};
    int n = poll(&q, 1, 1000);
    char b = 0;
    int ok = d == c && n == 1 && read(c, &b, 1) == 1 && b == 'a';
    printf("%s closefrom: a pipe end F_DUPFD'd to fd %d polls %d and reads %s\n", ok ? "PASS" : "FAIL", c,
           n, ok ? "a" : "nothing");
    if (!ok) failures++;
    close(c);
    close(p[0]);
    close(p[1]);

    c = conn();
    close_range(c, c, 0);
    check_pipe("close_range", c);

    printf(failures ? "SOME FAILED\n" : "ALL PASSED\n");
    return failures ? 1 : 0;
}

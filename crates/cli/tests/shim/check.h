/* What the shim's C test programs share: CHECK(name, cond, fmt, ...) prints
 * "PASS name" or "FAIL name: <fmt...>" on one line, flushed, and counts the
 * failures in `failures` (the program's exit status says whether any). */
#ifndef CORESTACK_SHIM_CHECK_H
#define CORESTACK_SHIM_CHECK_H
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>

static int failures __attribute__((unused));
#define CHECK(name, cond, ...)         \
    do {                               \
        if (cond) {                    \
            printf("PASS %s\n", name); \
        } else {                       \
            printf("FAIL %s: ", name); \
            printf(__VA_ARGS__);       \
            printf("\n");              \
            failures++;                \
        }                              \
        fflush(stdout);                \
    } while (0)

/* The peer's IPv4 address and port from argv[1] and argv[2]; with another
 * argument count than `want`, prints "usage: USAGE" and exits 2. */
static inline struct sockaddr_in peer_args(int argc, char **argv, int want, const char *usage) {
    if (argc != want) {
        fprintf(stderr, "usage: %s\n", usage);
        exit(2);
    }
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &peer.sin_addr) != 1) {
        fprintf(stderr, "usage: %s (not an IPv4 address: %s)\n", usage, argv[1]);
        exit(2);
    }
    return peer;
}

#endif

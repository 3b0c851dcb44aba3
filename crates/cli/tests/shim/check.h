/* What the shim's C test programs share: CHECK(name, cond, fmt, ...) prints
 * "PASS name" or "FAIL name: <fmt...>" on one line, flushed, and counts the
 * failures in `failures` (the program's exit status says whether any). */
#ifndef CORESTACK_SHIM_CHECK_H
#define CORESTACK_SHIM_CHECK_H
#include <stdio.h>

static int failures;
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

#endif

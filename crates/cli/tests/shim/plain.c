/* A program with nothing special: exits 0. The exec test builds it
 * statically linked (refused) and dynamically linked (runs). */
int main(void) { return 0; }

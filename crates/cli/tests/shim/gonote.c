/* Stands in for a Go program linked dynamically (cgo): an ordinary C
 * program carrying the section Go's linker writes, `.note.go.buildid`.
 * Built as is (dynamic) and with -static by the exec test; exits 0. */
static const char note[] __attribute__((used, section(".note.go.buildid"))) = "Go";

int main(void) { return note[0] != 'G'; }

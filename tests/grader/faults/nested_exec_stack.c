// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* A GNU nested function whose address escapes needs a trampoline on the stack, so the
 * compiler marks the object as wanting an executable stack (.note.GNU-stack "X"), and the
 * linked player would map its stack executable: a place to write instructions and run them.
 * The object checker refuses an object that asks for it. */
#include "../../../solutions/01-collectives/collectives.c"

int lab_nested(int x) {
    int add(int y) { return x + y; }
    int (*volatile f)(int) = add;
    return f(1);
}

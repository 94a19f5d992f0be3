/* Architecture-neutral shim so <linux/bpf.h> compiles for the BPF target
 * without the host multiarch include directory. */
#include <asm-generic/bitsperlong.h>
